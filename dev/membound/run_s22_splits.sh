#!/usr/bin/env bash
# (Measured on this session's intermediate tree: CML_NORM_BWD_STAGED_MINROW / _SPLITS and mode 2's cluster plan were taken out
# after it; results in dev/membound/s22_results/ and the README, "Session 22".)
# Session 22: the staged norm backward's plans (dev/membound/staged_plan_probe.cu) and its cluster form at fixed
# splits (CML_NORM_BWD_STAGED_SPLITS 2 / 4 / 8 / 16, any chunk size) against the dispatch before it (mode 1), in
# turns, ROUNDS rounds. Binaries built locally (90a-real, stripped, xz) in build-s22x/.
#   XDIR=build-s22x bash dev/membound/run_s22_splits.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
for m in "" "CML_NORM_BWD_STAGED_MINROW=24576" "CML_NORM_BWD_STAGED=3"; do
    echo "== $m" >>$X/plans.txt
    env $m /tmp/bin/staged_plan_probe >>$X/plans.txt 2>&1
done
printf '#!/bin/sh\nCML_NORM_BWD_STAGED=1 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-old
for s in 2 4 8 16; do
    printf '#!/bin/sh\nCML_NORM_BWD_STAGED_MINROW=1 CML_NORM_BWD_STAGED_SPLITS=%s exec /tmp/bin/camel-new "$@"\n' $s \
        >/tmp/bin/camel-s$s
done
chmod +x /tmp/bin/camel-*
in_turns ${ROUNDS:-3} "old s2 s4 s8 s16" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X old >$X/summary.txt 2>&1
cat $X/plans.txt $X/stages.txt
grep "32768\|262144" $X/summary.txt; tail -4 $X/summary.txt
