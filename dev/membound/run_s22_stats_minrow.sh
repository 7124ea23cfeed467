#!/usr/bin/env bash
# Session 22: whether the mean / rstd table (s22_stats_table.patch) lowers the staged kernel's fixed cost a row, so
# that smaller chunks (more CTAs a row, fewer groups and partial rows) pay: the row-sync form (mode 3) at least rows
# of 48 / 24 / 12 KB (s22_minrow_env.patch) against mode 2 (the default plan), in turns. Compare with
# s22_results/minrow_summary.txt (the same without the table). camel-sm = f06cbf4 + both patches (build-s22x/).
#   XDIR=build-s22x bash dev/membound/run_s22_stats_minrow.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
printf '#!/bin/sh\nexec /tmp/bin/camel-sm "$@"\n' >/tmp/bin/camel-m2
for r in 48 24 12; do
    printf '#!/bin/sh\nCML_NORM_BWD_STAGED=3 CML_DEV_NBG_MINROW=%s exec /tmp/bin/camel-sm "$@"\n' $((r * 1024)) \
        >/tmp/bin/camel-r$r
done
chmod +x /tmp/bin/camel-*
in_turns ${ROUNDS:-3} "m2 r48 r24 r12" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X m2 >$X/summary.txt 2>&1
cat $X/stages.txt; grep "32768\|262144\|geomean" $X/summary.txt
