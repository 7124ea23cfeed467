#!/usr/bin/env bash
# Session 22: the row-sync form (CML_NORM_BWD_STAGED=3) with smaller least row sizes (s22_minrow_env.patch:
# CML_DEV_NBG_MINROW bytes, default 48 KB) so that 16-bit rows take more CTAs and fewer groups (fewer partial rows),
# against mode 1 (the cluster form). camel-new = f06cbf4 + the patch, built locally in build-s22x/.
#   XDIR=build-s22x bash dev/membound/run_s22_minrow.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
for r in 49152 24576 12288; do
    echo "== minrow $r" >>$X/plans.txt
    CML_NORM_BWD_STAGED=3 CML_DEV_NBG_MINROW=$r /tmp/bin/staged_plan_probe >>$X/plans.txt 2>&1
done
printf '#!/bin/sh\nCML_NORM_BWD_STAGED=1 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-m1
for r in 48 24 12; do
    printf '#!/bin/sh\nCML_NORM_BWD_STAGED=3 CML_DEV_NBG_MINROW=%s exec /tmp/bin/camel-new "$@"\n' $((r * 1024)) \
        >/tmp/bin/camel-r$r
done
chmod +x /tmp/bin/camel-*
in_turns ${ROUNDS:-3} "m1 r48 r24 r12" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X m1 >$X/summary.txt 2>&1
grep "32768 \|262144 \|minrow" $X/plans.txt; cat $X/stages.txt; grep "32768\|262144\|geomean" $X/summary.txt
