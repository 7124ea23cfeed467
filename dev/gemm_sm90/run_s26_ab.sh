#!/usr/bin/env bash
# Session 26: the MLP weight gradients on 160-wide tiles in clusters of 4 (table rows) -- test_gpu_gemm whole, the
# three sanitizers of test_sm90_wide160, then camel-base (the library before, session 25's build) and camel-new
# (this tree) over the bf16 and fp16 GPT-2 set in turns, ROUNDS rounds (default 4).
#   XDIR=build-s26x bash dev/gemm_sm90/run_s26_ab.sh   (carry build-s26x)
set -u
ROUNDS=${ROUNDS:-4}
. "$(dirname "$0")/../carried.sh"
unpack camel-base camel-new test_gpu_gemm
run_tests gemm
TOOLS="memcheck synccheck racecheck" sanitize /tmp/bin/test_gpu_gemm test_sm90_wide160
tests_summary
grep -h "forced 160-wide" $X/test_gemm.log $X/san_*.log
in_turns $ROUNDS "base new" bench gemm --dtype bf16,fp16 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X base new >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
