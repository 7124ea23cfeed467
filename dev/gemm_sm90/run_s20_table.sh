#!/usr/bin/env bash
# Session 20: the re-tuned 16-bit table (run_s20_retune.sh merged by tuned_merge.py) against the table before, camel
# bench gemm bf16 + fp16 (GPT-2 set, squares 1024-4096) in turns, ROUNDS rounds. Binaries in build-s20x/ (built
# locally for 90a-real, stripped, xz): camel-head (5079259) and camel-table (the same code, the new table).
#   bash dev/gemm_sm90/run_s20_table.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s20x; timeout_s 600)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-head camel-table
in_turns ${ROUNDS:-8} "head table" bench gemm --dtype bf16,fp16 --set gpt2,square --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X head table >$X/summary.txt 2>&1
cat $X/summary.txt
