#!/usr/bin/env bash
# Session 32: nbw_kernel (LayerNorm / RMSNorm backward, bf16 4096x4096) asks its first row into L2 before its PDL wait
# (prefetch.global.L2), while the grid before it (the previous call's partial sum) still runs; the staged kernel's
# cluster form runs with PDL (a grid of its own prefetching for it was tried); later the row-sync form and the LayerNorm
# forward's one-pass kernel prefetch too (the chunk their ticket will likely give them). One binary, the variants
# as environment switches: off = CML_PDL_PREFETCH=0 (the kernel before), pre = the default, pN = N rows; head =
# a build of the tree before (camel-head.xz, when carried). The norm tests,
# memcheck / racecheck / synccheck of test_wide_rows, then camel bench membound in turns.
#   XDIR=build-s32x bash dev/membound/run_s32_pre.sh   (TESTS=0 skips the tests; V, BASE, OPS, ROUNDS)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
for r in 0 1 2 3; do
    printf '#!/bin/sh\nCML_PDL_PREFETCH=%s exec /tmp/bin/camel "$@"\n' $r >/tmp/bin/camel-p$r
done
cp /tmp/bin/camel-p0 /tmp/bin/camel-off
printf '#!/bin/sh\nexec /tmp/bin/camel "$@"\n' >/tmp/bin/camel-pre
chmod +x /tmp/bin/camel-*
if [ "${TESTS:-1}" = 1 ]; then
    run_tests layernorm rmsnorm
    sanitize /tmp/bin/test_gpu_layernorm test_wide_rows
    TOOLS="memcheck" TAG=fwd sanitize /tmp/bin/test_gpu_layernorm test_fwd_v2
    TOOLS="memcheck racecheck" TAG=st sanitize /tmp/bin/test_gpu_layernorm test_staged_rows # synccheck: no room for
    # the staged kernel's 192 KB CTAs in its occupancy query, and the fallback's clusters of 9+ (session 18: the tool)
    TOOLS="memcheck" TAG=rms sanitize /tmp/bin/test_gpu_rmsnorm test_wide_rows test_staged_rows
    tests_summary
fi
in_turns ${ROUNDS:-4} "${V:-off pre}" bench membound --ops ${OPS:-layernorm_bwd,rmsnorm_bwd} --mode both
python3 dev/membound/ab_summary.py $X ${BASE:-off} >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s32_pre.tgz -C $X .
