#!/usr/bin/env bash
# (Binaries from intermediate trees of session 30 whose dev switches -- CML_SM90_GROUP_ORDER, CML_BENCH_DEV_SHARED_B,
# CML_SM90_DEV_NOACQ / NOPFD -- were removed with the final form; dev/gemm_sm90/README.md, session 30.)
# Session 30: grouped problem orders, second round -- natural, descending (7..0), alternating (7,0,6,1,5,2,4,3), and
# descending with every problem reading the same B (CML_BENCH_DEV_SHARED_B: the grouped launch's own cost, without
# the experts' distinct B bytes), in turns over the grouped set (bf16, fp16, tf32, e4m3).
#   run(carry=["build-s30x"], command="XDIR=build-s30x bash dev/gemm_sm90/run_s30_order2.sh; tar czf $OUT/r.tgz -C /tmp/x .")
set -u
XDIR=${XDIR:-build-s30x}
. "$(dirname "$0")/../carried.sh"
unpack camel-base
printf '#!/bin/sh\nexec /tmp/bin/camel-base "$@"\n' >/tmp/bin/camel-nat
printf '#!/bin/sh\nCML_SM90_GROUP_ORDER=7,6,5,4,3,2,1,0 exec /tmp/bin/camel-base "$@"\n' >/tmp/bin/camel-desc
printf '#!/bin/sh\nCML_SM90_GROUP_ORDER=7,0,6,1,5,2,4,3 exec /tmp/bin/camel-base "$@"\n' >/tmp/bin/camel-alt
printf '#!/bin/sh\nCML_BENCH_DEV_SHARED_B=1 CML_SM90_GROUP_ORDER=7,6,5,4,3,2,1,0 exec /tmp/bin/camel-base "$@"\n' >/tmp/bin/camel-shb
chmod +x /tmp/bin/camel-*
in_turns ${ROUNDS:-4} "nat desc alt shb" bench gemm --dtype bf16,fp16,tf32,e4m3 --set grouped --reps 20
python3 dev/gemm_sm90/s20_summary.py $X nat desc alt shb >$X/summary.txt 2>&1
cat $X/summary.txt
for v in nat desc alt shb; do echo "== $v"; grep -h "per-problem" $X/bench_${v}_*.txt | sort | uniq -c; done
