#!/usr/bin/env bash
# Session 28, an upper bound: camel-hot has the split-K hand-off and the register epilogue compiled out (every launch
# stores by TMA; the split-K row, attn_proj dW, computes garbage there and is flagged), so the consumers' path from the
# main loop to the TMA epilogue holds no jump over cold code. Timelines tlhead / tlhot, then camel-head (the tree)
# against camel-hot in turns.
#   XDIR=build-s28x bash dev/gemm_sm90/run_s28_hot.sh   (carry build-s28x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-head camel-hot camel-tlhead camel-tlhot
tl_rounds 2 "tlhead tlhot"
tl_report 2 "tlhead tlhot"
in_turns ${ROUNDS:-8} "head hot" bench gemm --dtype bf16,fp16 --set square,gpt2 --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X head hot >$X/summary.txt 2>&1
cat $X/stages.txt; grep -v "^    14 \|slot  ctas\|CTA ends\|^/tmp\|ramp" $X/timelines.txt | grep -v "^     [1-9] " ; cat $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s28_hot.tgz -C $X --exclude='*_square_*' --exclude='*_gpt2_*' .
