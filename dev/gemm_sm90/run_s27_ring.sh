#!/usr/bin/env bash
# Session 27: a CTA's last tile in the cooperative kernel (no K split, 16-bit or fp8 inputs) stages its whole TMA-store
# epilogue in the ring, which no load will refill, in one round (gemm_sm90_kernel.cuh; session 19's form of the same
# idea, on the 192-wide ring only, read 0.986-1.003). test_gpu_gemm whole, the three sanitizers of test_sm90_configs /
# test_sm90_wide160, then camel-fd (the tree before) against camel-ring in turns.
#   XDIR=build-s27x bash dev/gemm_sm90/run_s27_ring.sh   (carry build-s27x)
set -u
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
unpack camel-fd camel-ring test_gpu_gemm-ring
mv /tmp/bin/test_gpu_gemm-ring /tmp/bin/test_gpu_gemm
run_tests gemm
TOOLS="memcheck racecheck synccheck" sanitize /tmp/bin/test_gpu_gemm test_sm90_configs test_sm90_wide160
tests_summary
in_turns $ROUNDS "fd ring" bench gemm --dtype bf16,fp16 --set square,gpt2 --sizes 1024,2048,4096,8192 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X fd ring >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s27_ring.tgz -C $X .
