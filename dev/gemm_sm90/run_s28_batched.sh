#!/usr/bin/env bash
# Session 28: the batched (64 x 1024^3, and as one 8192 x 8192 x 1024) and odd (3000 x 5000 x 1000) cases, which the
# estimate's ping-pong rule (session 24) sends to 128 x 192 tiles at cluster 2, against 128 x 256 / 128 x 192
# cooperative at cluster 2 and the ping-pong 128 wide (camel-force with CML_SM90_DEV_FORCE_ANY), in turns.
#   XDIR=build-s28x bash dev/gemm_sm90/run_s28_batched.sh   (carry build-s28x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-force
for c in "w256 128,256,1,2,16,0,0" "w192 128,192,1,2,16,0,0" "p128 128,128,1,2,8,1,0"; do
    set -- $c
    printf '#!/bin/sh\nCML_SM90_DEV_FORCE_ANY=%s exec /tmp/bin/camel-force "$@"\n' $2 >/tmp/bin/camel-$1
    chmod +x /tmp/bin/camel-$1
done
in_turns ${ROUNDS:-5} "force w256 w192 p128" bench gemm --dtype bf16,fp16 --set odd,batched --reps 20
python3 dev/gemm_sm90/s20_summary.py $X force w256 w192 p128 >$X/summary.txt 2>&1
cat $X/summary.txt
