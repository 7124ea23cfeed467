#!/usr/bin/env bash
# Session 24 (dev, s24_stream_k_defer.patch): stream-K whose helpers count in after their next piece's main loop and
# whose heads wait for them: test_gpu_gemm whole (no sanitizers: the heads spin on the helpers), then camel-dp (the
# estimate without stream-K) and camel-new in turns, GPT-2 set at 8192 and 4096 tokens, bf16 and fp16, 3 rounds.
#   XDIR=build-s24x bash dev/gemm_sm90/run_s24_defer.sh   (carry build-s24x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-dp camel-new test_gpu_gemm
run_tests gemm
tests_summary
for t in 8192 4096; do
    in_turns 3 "dp new" bench gemm --dtype bf16,fp16 --set gpt2 --tokens $t --reps 20
    mkdir -p $X/t$t && mv $X/bench_* $X/t$t/
    python3 dev/gemm_sm90/s20_summary.py $X/t$t dp new >$X/summary_$t.txt 2>&1
done
cat $X/stages.txt
for t in 8192 4096; do echo "== $t tokens"; grep "gpt2_dw\|geomean" $X/summary_$t.txt; done
