#!/usr/bin/env bash
# Device probe: cuBLASLt's algorithm choice for the GPT-2 and square shapes, and the harness's
# main loop alone (nostore) against its TMA-store epilogue, 128/256-wide tiles, clusters 1/2.
set -u
mkdir -p /tmp/probe
nvcc -O2 dev/gemm_sm90/lt_algo.c -lcublasLt -o /tmp/probe/lt_algo &
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc dev/gemm_sm90/harness.cu -lcublas -lcuda \
    -o /tmp/probe/h >/tmp/probe/nvcc.log 2>&1 || { tail /tmp/probe/nvcc.log; exit 1; }
wait
SHAPES="8192 768 768 N T  8192 2304 768 N T  8192 3072 768 N T  8192 768 3072 N T  8192 768 2304 N N  8192 768 3072 N N  2304 768 8192 T N  3072 768 8192 T N  768 3072 8192 T N  1024 1024 1024 N N  2048 2048 2048 N N  4096 4096 4096 N N  8192 8192 1024 N N"
/tmp/probe/lt_algo $SHAPES
set -- $SHAPES
while [ $# -ge 5 ]; do
    for bn in 128 256; do for cl in 1 2; do for mode in tma nostore; do
        printf "%s %s %s %s%s bn %s cl %s %-8s " $1 $2 $3 $4 $5 $bn $cl $mode
        timeout 20 /tmp/probe/h $1 $2 $3 $4 $5 20 $bn 16 $cl $mode | tail -1
    done; done; done
    shift 5
done
