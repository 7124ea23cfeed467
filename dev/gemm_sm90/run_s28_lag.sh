#!/usr/bin/env bash
# Session 28, last: the cooperative kernel's consumer 1 starts its first tile LAG clocks after the first stage lands
# (camel-lag12: 1200, camel-lag20: 2000), so that the two consumers' epilogues stop coinciding -- consumer 0's runs under
# consumer 1's last k-blocks (one warpgroup alone keeps the tensor cores busy); timelines tlhead / tllag (1200); then
# camel-head (the tree) against lag12 and lag20 in turns.
#   XDIR=build-s28x bash dev/gemm_sm90/run_s28_lag.sh   (carry build-s28x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-head camel-lag12 camel-lag20 camel-tlhead camel-tllag
tl_rounds 1 "tlhead tllag"
tl_report 1 "tlhead tllag"
in_turns ${ROUNDS:-6} "head lag12 lag20" bench gemm --dtype bf16,fp16 --set square,gpt2 --sizes 1024,2048,4096,8192 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X head lag12 lag20 >$X/summary.txt 2>&1
cat $X/stages.txt; grep -v "^    14 \|slot  ctas\|CTA ends\|^/tmp\|ramp" $X/timelines.txt | grep -v "^     [1-9] " ; cat $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && cp $X/summary.txt ${OUT:-/tmp/out}/lag_summary.txt && grep -v "^    14 \|slot  ctas\|CTA ends" $X/timelines.txt >${OUT:-/tmp/out}/lag_timelines.txt
