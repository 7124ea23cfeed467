#!/usr/bin/env bash
# Session 28: the producer waits, in its first tile, for stage 0 to land after issuing 1 (camel-fw1) or 2 (camel-fw2)
# stages, so that the first stage does not queue behind the whole ring; timelines of tl (the tree) and tlfw2, then
# camel-force (the tree as is) against fw1 and fw2 in turns.
#   XDIR=build-s28x bash dev/gemm_sm90/run_s28_fw.sh   (carry build-s28x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-tl camel-tlfw2 camel-force camel-fw1 camel-fw2
tl_rounds 2 "tl tlfw2"
tl_report 2 "tl tlfw2"
in_turns ${ROUNDS:-6} "force fw1 fw2" bench gemm --dtype bf16,fp16 --set square,gpt2 --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X force fw1 fw2 >$X/summary.txt 2>&1
cat $X/stages.txt; grep -v "^    14 \|slot  ctas\|CTA ends\|^/tmp\|ramp" $X/timelines.txt | grep -v "^     [1-9] " ; cat $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s28_fw.tgz -C $X --exclude='*_square_*' --exclude='*_gpt2_*' .
