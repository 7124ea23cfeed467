#!/usr/bin/env bash
# Session 29: the producer's L2 prefetch of k-block kb + N with the loads of kb (cml__sm90_problem.l2_ahead; dev switch
# CML_SM90_L2_AHEAD) at N = 0 / 4 / 8, one binary, in turns over the batched set (bf16, fp16, tf32), the squares and
# GPT-2 (bf16, fp16); test_gpu_gemm whole at N = 4 first. Binaries built locally into build-s29x/. Results in
# $OUT/s29_l2pf.tar.xz.
#   run(carry=["build-s29x"], command="XDIR=build-s29x bash dev/gemm_sm90/run_s29_l2pf.sh")
set -u
XDIR=${XDIR:-build-s29x}
. "$(dirname "$0")/../carried.sh"
unpack camel-pf test_gpu_gemm
for n in 0 4 8; do
    printf '#!/bin/sh\nCML_SM90_L2_AHEAD=%s exec /tmp/bin/camel-pf "$@"\n' $n >/tmp/bin/camel-pf$n
    chmod +x /tmp/bin/camel-pf$n
done
CML_SM90_L2_AHEAD=4 run_tests gemm
tests_summary
in_turns ${ROUNDS:-3} "pf0 pf4 pf8" bench gemm --dtype bf16,fp16 --set batched,square,gpt2 \
    --sizes 1024,2048,4096,8192,16384 --reps 20
for v in pf0 pf4 pf8; do
    timeout 100 /tmp/bin/camel-$v bench gemm --dtype tf32,e4m3 --set batched --reps 20 >$X/other_$v.txt 2>&1
done
python3 dev/gemm_sm90/s20_summary.py $X pf0 pf4 pf8 >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
for v in pf0 pf4 pf8; do echo "== $v"; grep -h "per-problem" $X/bench_${v}_3.txt $X/other_$v.txt; done
mkdir -p ${OUT:-/tmp/out} && tar -C $X -cJf ${OUT:-/tmp/out}/s29_l2pf.tar.xz .
