#!/usr/bin/env bash
# Session 28: the kernel's grouped path compiled only into the grouped launch's instance (template GROUPED), so that
# the other instances' producer and consumers reach their first tile without jumping over it. test_gpu_gemm whole
# (this build) and memcheck / racecheck / synccheck of its grouped test; timelines of tl (the tree) and tlg; then
# camel-force (the tree as is) against camel-g in turns.
#   XDIR=build-s28x bash dev/gemm_sm90/run_s28_g.sh   (carry build-s28x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-tl camel-tlg camel-force camel-g test_gpu_gemm
run_tests gemm
sanitize /tmp/bin/test_gpu_gemm test_grouped
tests_summary
tl_rounds 2 "tl tlg"
tl_report 2 "tl tlg"
in_turns ${ROUNDS:-8} "force g" bench gemm --dtype bf16,fp16 --set square,gpt2 --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X force g >$X/summary.txt 2>&1
cat $X/stages.txt; grep -v "^    14 \|slot  ctas\|CTA ends\|^/tmp\|ramp" $X/timelines.txt | grep -v "^     [1-9] " ; cat $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s28_g.tgz -C $X --exclude='*_square_*' --exclude='*_gpt2_*' .
