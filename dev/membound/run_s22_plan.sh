#!/usr/bin/env bash
# (Measured on this session's intermediate tree: CML_NORM_BWD_STAGED_MINROW / _SPLITS and mode 2's cluster plan were taken out
# after it; results in dev/membound/s22_results/ and the README, "Session 22".)
# Session 22: the staged norm backward planned (norm_bwd_staged.cuh, CML_NORM_BWD_STAGED=2: clusters of 2..16 CTAs
# of chunks sized by a bytes model, the row-sync form where no cluster plan holds) against the dispatch before it
# (mode 1: the cluster form for 16-bit rows, nbl / nbx / nbc for the rest) and the row-sync form alone (mode 3), at
# least row sizes of 24 and 48 KB (CML_NORM_BWD_STAGED_MINROW). Binaries built locally (90a-real, stripped, xz) in
# build-s22x/. Steps: test_gpu_layernorm / rmsnorm whole; memcheck / racecheck of both tests' test_staged_rows;
# camel bench membound (the norm backward) in turns, ROUNDS rounds; the summary last.
#   XDIR=build-s22x bash dev/membound/run_s22_plan.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
printf '#!/bin/sh\nCML_NORM_BWD_STAGED=1 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-old
printf '#!/bin/sh\nCML_NORM_BWD_STAGED_MINROW=24576 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-p24
printf '#!/bin/sh\nexec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-p48
printf '#!/bin/sh\nCML_NORM_BWD_STAGED=3 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-rs48
chmod +x /tmp/bin/camel-*
run_tests layernorm rmsnorm
TOOLS="memcheck racecheck" TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_staged_rows &
TOOLS="memcheck racecheck" TAG=rms_ sanitize /tmp/bin/test_gpu_rmsnorm test_staged_rows &
wait
tests_summary
in_turns ${ROUNDS:-3} "old p24 p48 rs48" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X old >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
