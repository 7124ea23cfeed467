#!/usr/bin/env bash
# Session 28: (1) where A's and B's tensor maps are prefetched, each with the kernel ending once its TMA stores have
# read shared memory (camel-er: the tree's prefetch; camel-np: none; camel-pl: after the first tile is located;
# camel-pc: by consumer 0, with D's map too) against the tree (camel-force run as is: the same device code);
# (2) the 128-row ping-pong on the squares (camel-force with CML_SM90_DEV_FORCE_ANY: 128 x 128 / 128 x 192 at cluster 1 / 2).
#   XDIR=build-s28x bash dev/gemm_sm90/run_s28_ab.sh   (carry build-s28x)
set -u
ROUNDS=${ROUNDS:-6}
. "$(dirname "$0")/../carried.sh"
unpack camel-force camel-er camel-np camel-pl camel-pc
for c in "p128c1 128,128,1,1,8,1,0" "p128c2 128,128,1,2,8,1,0" "p192c1 128,192,1,1,8,1,0" "p192c2 128,192,1,2,8,1,0"; do
    set -- $c
    printf '#!/bin/sh\nCML_SM90_DEV_FORCE_ANY=%s exec /tmp/bin/camel-force "$@"\n' $2 >/tmp/bin/camel-$1
    chmod +x /tmp/bin/camel-$1
done
in_turns $ROUNDS "force er np pl pc" bench gemm --dtype bf16,fp16 --set square,gpt2 --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X force er np pl pc >$X/summary.txt 2>&1
mkdir -p $X/ab && mv $X/bench_* $X/ab/ 2>/dev/null; mkdir -p $X/sq
X0=$X; X=$X/sq
in_turns 4 "force p128c1 p128c2 p192c1 p192c2" bench gemm --dtype bf16,fp16 --set square --sizes 2048,4096,8192 --reps 20
X=$X0
python3 dev/gemm_sm90/s20_summary.py $X/sq force p128c1 p128c2 p192c1 p192c2 >$X/summary_pp.txt 2>&1
cat $X/stages.txt; cat $X/summary.txt $X/summary_pp.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s28_ab.tgz -C $X .
