#!/usr/bin/env bash
# (Measured on this session's intermediate tree: CML_NORM_BWD_STAGED_MINROW / _SPLITS and mode 2's cluster plan were taken out
# after it; results in dev/membound/s22_results/ and the README, "Session 22".)
# Session 22: the staged norm backward's row-sync form (norm_bwd_staged.cuh, nbs_xc_rows: any number of CTAs a row,
# the row sums through L2, f32 too) against the dispatch before it (CML_NORM_BWD_STAGED=1: the cluster form for
# 16-bit rows, nbl / nbx / nbc for the rest), at three least row sizes (CML_NORM_BWD_STAGED_MINROW 24 / 48 / 96 KB).
# Binaries built locally (90a-real, stripped, xz) in build-s22x/. Steps: test_gpu_layernorm / rmsnorm whole;
# memcheck / racecheck / synccheck of both tests' test_staged_rows; camel bench membound (the norm backward) in
# turns, ROUNDS rounds; the summary last.
#   XDIR=build-s22x bash dev/membound/run_s22_rowsync.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
printf '#!/bin/sh\nCML_NORM_BWD_STAGED=1 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-old
printf '#!/bin/sh\nCML_NORM_BWD_STAGED_MINROW=24576 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-r24
printf '#!/bin/sh\nexec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-r48
printf '#!/bin/sh\nCML_NORM_BWD_STAGED_MINROW=98304 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-r96
chmod +x /tmp/bin/camel-*
run_tests layernorm rmsnorm
TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_staged_rows &
TAG=rms_ sanitize /tmp/bin/test_gpu_rmsnorm test_staged_rows &
wait
tests_summary
in_turns ${ROUNDS:-3} "old r24 r48 r96" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X old >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
