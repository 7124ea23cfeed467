#!/usr/bin/env bash
# Session 28: the estimate's ping-pong rule only where the 192-wide tiling's last column of tiles is (nearly) full
# (camel-new) against the tree before (camel-rec, 001a9fc), in turns over the odd, batched and GPT-2 sets; and
# test_gpu_gemm whole (new).
#   XDIR=build-s28x bash dev/gemm_sm90/run_s28_pprule.sh   (carry build-s28x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-rec camel-new test_gpu_gemm
run_tests gemm
tests_summary
in_turns ${ROUNDS:-4} "rec new" bench gemm --dtype bf16,fp16 --set odd,batched,gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X rec new >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt; grep "per-problem" $X/bench_new_4.txt
