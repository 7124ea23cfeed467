#!/usr/bin/env bash
# Device probe (session 5): where a tile's epilogue time goes. Builds the harness five times,
# with CML_SM90_DEV_EPI = 0 (the library's TMA-store epilogue), 1 (no epilogue: the consumers go
# from one tile's main loop straight to the next), 2 (the shared-memory staging and barriers,
# no TMA stores), 3 (the TMA stores, no staging writes), 6 (no epilogue at run time, its code
# compiled in: what the code's presence costs the main loop), and times each against cuBLAS on the
# K = 768 GPT-2 forward shapes (op NT) and 4096^3, cluster 1, group_m 16. Session 4's `nostore`
# kept the staging and barriers, so it could not answer this. VARIANTS and CASES (M,N,K,BN ...)
# choose what runs.
set -u
mkdir -p /tmp/epi
cc="nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -DHARNESS_ONLY_NT"
VARIANTS=${VARIANTS:-0 1 2 3 6}
CASES=${CASES:-"8192,768,768,192 8192,2304,768,192 8192,3072,768,256 4096,4096,4096,256"}
for v in $VARIANTS; do
    $cc -DCML_SM90_DEV_EPI=$v dev/gemm_sm90/harness.cu -lcublas -lcuda -o /tmp/epi/h$v >/tmp/epi/nvcc$v.log 2>&1 &
done
wait
for v in $VARIANTS; do [ -x /tmp/epi/h$v ] || { tail /tmp/epi/nvcc$v.log; exit 1; }; done
for case in $CASES; do
    set -- ${case//,/ }
    for v in $VARIANTS; do
        timeout 60 /tmp/epi/h$v $1 $2 $3 N T 30 $4 16 1 tma
    done
done
