#!/usr/bin/env bash
# Session 28: the start-up in parts with the tensor maps not prefetched (tlnp), the first tile's parameters touched
# by the producer's idle warps (tlt), and both with warp 1 prefetching the maps (tlt2), against the timeline build of
# the tree (tl); then the 128-row ping-pong 192 wide at cluster 2 (camel-force with CML_SM90_DEV_FORCE_ANY) on the
# squares 6144-16384 against the tree's choice (camel-force as is), in turns.
#   XDIR=build-s28x bash dev/gemm_sm90/run_s28_tl.sh   (carry build-s28x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-tl camel-tlnp camel-tlt camel-tlt2 camel-force
printf '#!/bin/sh\nCML_SM90_DEV_FORCE_ANY=128,192,1,2,8,1,0 exec /tmp/bin/camel-force "$@"\n' >/tmp/bin/camel-p192c2
chmod +x /tmp/bin/camel-p192c2
tl_rounds 2 "tl tlnp tlt tlt2"
tl_report 2 "tl tlnp tlt tlt2" "square tl_1024x1024x1024_NN" "square tl_2048x2048x2048_NN" "gpt2 tl_8192x768x768_NT" \
    "gpt2 tl_8192x768x3072_NN" "gpt2 tl_8192x2304x768_NT"
in_turns ${ROUNDS:-4} "force p192c2" bench gemm --dtype bf16,fp16 --set square --sizes 6144,8192,12288,16384 --reps 10
python3 dev/gemm_sm90/s20_summary.py $X force p192c2 >$X/summary_pp.txt 2>&1
cat $X/stages.txt; grep -v "^    14 \|slot  ctas\|CTA ends\|^/tmp\|ramp" $X/timelines.txt; cat $X/summary_pp.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s28_tl.tgz -C $X --exclude='*_square_*' --exclude='*_gpt2_*' .
