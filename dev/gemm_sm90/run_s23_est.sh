#!/usr/bin/env bash
# Session 23: the cost estimate choosing the 128-row ping-pong (camel-est) against the estimate before (camel-noest: the
# same tree with CML_SM90_ESTIMATE_PINGPONG=0; s20_variants.sh est= noest=-DCML_SM90_ESTIMATE_PINGPONG=0), on shapes the tuned table does not list: the GPT-2 set at 4096 and 16384 tokens, bf16 /
# fp16 / tf32, camel bench gemm in turns, ROUNDS rounds (default 3).   XDIR=build-s23x bash dev/gemm_sm90/run_s23_est.sh
set -u
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
unpack camel-est camel-noest
for t in 4096 16384; do
    in_turns $ROUNDS "noest est" bench gemm --dtype bf16,fp16,tf32 --set gpt2 --tokens $t --reps 20
    mkdir -p $X/t$t && mv $X/bench_* $X/t$t/
    python3 dev/gemm_sm90/s20_summary.py $X/t$t noest est >$X/summary_$t.txt 2>&1
done
cat $X/stages.txt $X/summary_*.txt
