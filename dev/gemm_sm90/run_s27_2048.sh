#!/usr/bin/env bash
# Session 27, last: 2048^3 in 16 bits. Which cuBLASLt kernel runs fp16 and bf16 there (ncu, one launch each), and the
# table's 128 x 256 c1 against the same tile in clusters of 2 (B multicast: fewer bytes, maybe a higher clock) in turns.
# camel-force: the final tree with -DCML_SM90_DEV_FORCE_ANY=1 (s24_build_variant.sh); camel-c2 runs it with
# CML_SM90_DEV_FORCE_ANY=128,256,1,2,8,0,0.   XDIR=build-s27x bash dev/gemm_sm90/run_s27_2048.sh   (carry build-s27x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-force
printf '#!/bin/sh\nCML_SM90_DEV_FORCE_ANY=128,256,1,2,8,0,0 exec /tmp/bin/camel-force "$@"\n' >/tmp/bin/camel-c2
chmod +x /tmp/bin/camel-c2
M=gpu__time_duration.sum,sm__cycles_active.max,gpc__cycles_elapsed.avg.per_second
timeout 100 ncu --clock-control none --kernel-name-base function -k 'regex:sm90|nvjet' --metrics $M --csv --page raw \
    /tmp/bin/camel-force bench gemm --dtype bf16,fp16 --set square --sizes 2048 --reps 2 >$X/ncu.csv 2>$X/ncu.err
stamp "ncu rc $?"
python3 dev/gemm_sm90/s27/ncu_gap.py $X/ncu.csv >$X/ncu_gap.txt 2>&1
in_turns ${ROUNDS:-6} "force c2" bench gemm --dtype bf16,fp16 --set square --sizes 2048 --reps 40
python3 dev/gemm_sm90/s20_summary.py $X force c2 >$X/summary.txt 2>&1
cat $X/stages.txt; sed -n '/^medians/,$p' $X/ncu_gap.txt; cat $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s27_2048.tgz -C $X .
