#!/usr/bin/env bash
# Session 27, last: fp16 attn_proj fwd (8192 x 768 x 768 NT, 0.91-0.99 of cuBLASLt) keeps session 20's table row, the
# 128-row ping-pong 128 wide at cluster 1, where bf16 took cluster 2 in session 24 (1.024x). camel-force (the final tree
# with -DCML_SM90_DEV_FORCE_ANY=1) as is against camel-pp2 (CML_SM90_DEV_FORCE_ANY=128,128,1,2,8,1,0: every GPT-2
# case that can take it runs the ping-pong at cluster 2 -- read only the attn_proj fwd rows), in turns.
#   XDIR=build-s27x bash dev/gemm_sm90/run_s27_projfwd.sh   (carry build-s27x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-force
printf '#!/bin/sh\nCML_SM90_DEV_FORCE_ANY=128,128,1,2,8,1,0 exec /tmp/bin/camel-force "$@"\n' >/tmp/bin/camel-pp2
chmod +x /tmp/bin/camel-pp2
in_turns ${ROUNDS:-6} "force pp2" bench gemm --dtype bf16,fp16 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X force pp2 >$X/summary.txt 2>&1
cat $X/stages.txt; grep "attn_proj\|geomean" $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && cp $X/summary.txt ${OUT:-/tmp/out}/projfwd_summary.txt
