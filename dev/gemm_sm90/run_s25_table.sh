#!/usr/bin/env bash
# Session 25: tuned-table candidates from this session's `camel tune gemm --set gpt2` (s25_results/sc_bulk_tune.txt,
# gains of 1-2% there, under the tuner's 2% rule): camel-base (the table as committed) and camel-tab
# (s25_table_candidates.patch: bf16 / fp16 mlp_fc dX on the 128-row ping-pong with clusters of 2, bf16 lm_head dW on
# the ping-pong, bf16 lm_head dX back to the cooperative kernel), camel bench gemm over the bf16 and fp16 GPT-2 set in
# turns, ROUNDS rounds (default 4).   XDIR=build-s25x bash dev/gemm_sm90/run_s25_table.sh   (carry build-s25x)
set -u
ROUNDS=${ROUNDS:-4}
. "$(dirname "$0")/../carried.sh"
unpack camel-base camel-tab
in_turns $ROUNDS "base tab" bench gemm --dtype bf16,fp16 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X base tab >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
