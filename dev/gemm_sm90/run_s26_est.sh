#!/usr/bin/env bash
# Session 26: the cost estimate picking the 160-wide tile in clusters of 4 for 16-bit TN problems it fits in one wave
# (instead of four table rows at 8192 tokens): test_gpu_gemm whole, then camel-base (the library before the session),
# camel-tab (the table rows, 8079ce5) and camel-est (this tree) over the bf16 / fp16 GPT-2 set at 4096 and 1024 tokens
# (3 rounds in turns) and tab against est at 8192 (2 rounds).   XDIR=build-s26x bash dev/gemm_sm90/run_s26_est.sh
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-base camel-tab camel-est test_gpu_gemm
run_tests gemm
tests_summary
grep -h "forced 160-wide\|estimate for" $X/test_gemm.log
for t in 4096 1024; do
    mkdir -p $X/t$t
    X=$X/t$t in_turns 3 "base tab est" bench gemm --dtype bf16,fp16 --set gpt2 --tokens $t --reps 20
    python3 dev/gemm_sm90/s20_summary.py $X/t$t base tab est >$X/summary_$t.txt 2>&1
done
mkdir -p $X/t8192
X=$X/t8192 in_turns 2 "tab est" bench gemm --dtype bf16,fp16 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X/t8192 tab est >$X/summary_8192.txt 2>&1
cat $X/stages.txt
for t in 4096 1024 8192; do echo "== $t tokens"; grep "_dw\|geomean\|not ok" $X/summary_$t.txt; done
