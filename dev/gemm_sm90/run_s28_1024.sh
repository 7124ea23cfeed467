#!/usr/bin/env bash
# Session 28: 1024^3 after the grouped path left the other instances -- the table's rows (bf16 64 x 128 at cluster 1,
# group 16; fp16 64 x 128 at cluster 2, group 8) against each dtype run at the other's row (camel-force with
# CML_SM90_DEV_FORCE_ANY), in turns.
#   XDIR=build-s28x bash dev/gemm_sm90/run_s28_1024.sh   (carry build-s28x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-force
for c in "c1 64,128,1,1,16,0,0" "c2 64,128,1,2,8,0,0"; do
    set -- $c
    printf '#!/bin/sh\nCML_SM90_DEV_FORCE_ANY=%s exec /tmp/bin/camel-force "$@"\n' $2 >/tmp/bin/camel-$1
    chmod +x /tmp/bin/camel-$1
done
in_turns ${ROUNDS:-10} "force c1 c2" bench gemm --dtype bf16,fp16 --set square --sizes 1024 --reps 30
python3 dev/gemm_sm90/s20_summary.py $X force c1 c2 >$X/summary.txt 2>&1
cat $X/summary.txt
