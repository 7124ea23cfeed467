#!/usr/bin/env bash
# Session 24: tuned-table rows for the GPT-2 shapes of N = 768 (the 128-row ping-pong where `camel tune gemm` picked it
# in this session's runs): camel-base (the table as committed before) and camel-tab1 / camel-tab2 (two sets of
# candidate rows, s24_results/table_candidates.txt, built by s24_build_tables.sh), camel bench gemm over the bf16 and fp16 GPT-2 set in turns,
# ROUNDS rounds (default 4).   XDIR=build-s24x bash dev/gemm_sm90/run_s24_table.sh   (carry build-s24x)
set -u
ROUNDS=${ROUNDS:-4}
. "$(dirname "$0")/../carried.sh"
unpack camel-base camel-tab1 camel-tab2
in_turns $ROUNDS "base tab1 tab2" bench gemm --dtype bf16,fp16 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X base tab1 tab2 >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
