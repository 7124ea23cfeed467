#!/usr/bin/env bash
# Session 26, last: the TMA-store epilogue's two branches made one (same instantiations) -- test_gpu_gemm whole,
# memcheck / racecheck / synccheck of test_sm90_wide160, and camel-est (29aba58) against camel-final over the bf16 /
# fp16 GPT-2 set in turns, 2 rounds.   XDIR=build-s26x bash dev/gemm_sm90/run_s26_final.sh   (carry build-s26x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-est camel-final test_gpu_gemm
run_tests gemm
TOOLS="memcheck synccheck racecheck" sanitize /tmp/bin/test_gpu_gemm test_sm90_wide160
tests_summary
in_turns 2 "est final" bench gemm --dtype bf16,fp16 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X est final >$X/summary.txt 2>&1
cat $X/stages.txt; grep "geomean\|not ok" $X/summary.txt
