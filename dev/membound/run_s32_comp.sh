#!/usr/bin/env bash
# Session 32: the staged norm backward's companion grid (norm_bwd_staged.cuh: row-sync groups on the SMs that the
# cluster form leaves idle; bf16 256x262144: 7 clusters of 16 on 112 SMs, the companion 20 CTAs on the other 20).
# One binary, the variants as environment switches: off = CML_NORM_BWD_COMPANION=0 (the dispatch before), comp = the
# default plan, rNN = NN rows to the companion (CML_NORM_BWD_COMPANION_ROWS; V picks the variants, TESTS=0 skips the
# tests). The norm tests, memcheck / racecheck of
# test_staged_rows, then camel bench membound in turns.   XDIR=build-s32x bash dev/membound/run_s32_comp.sh
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel test_gpu_layernorm test_gpu_rmsnorm
printf '#!/bin/sh\nCML_NORM_BWD_COMPANION=0 exec /tmp/bin/camel "$@"\n' >/tmp/bin/camel-off
printf '#!/bin/sh\nexec /tmp/bin/camel "$@"\n' >/tmp/bin/camel-comp
for r in 12 16 20 24 28 36; do
    printf '#!/bin/sh\nCML_NORM_BWD_COMPANION_ROWS=%s exec /tmp/bin/camel "$@"\n' $r >/tmp/bin/camel-r$r
done
chmod +x /tmp/bin/camel-*
if [ "${TESTS:-1}" = 1 ]; then
    run_tests layernorm rmsnorm
    TOOLS="memcheck racecheck" sanitize /tmp/bin/test_gpu_layernorm test_staged_rows
    TOOLS="memcheck" TAG=rms sanitize /tmp/bin/test_gpu_rmsnorm test_staged_rows
    tests_summary
fi
in_turns ${ROUNDS:-3} "${V:-off comp r36}" bench membound --ops ${OPS:-layernorm_bwd,rmsnorm_bwd} --mode both
python3 dev/membound/ab_summary.py $X off >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s32_comp.tgz -C $X .
