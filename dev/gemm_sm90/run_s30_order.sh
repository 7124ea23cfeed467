#!/usr/bin/env bash
# (Binaries from intermediate trees of session 30 whose dev switches -- CML_SM90_GROUP_ORDER, CML_BENCH_DEV_SHARED_B,
# CML_SM90_DEV_NOACQ / NOPFD -- were removed with the final form; dev/gemm_sm90/README.md, session 30.)
# Session 30: the grouped launch's problem order (CML_SM90_GROUP_ORDER, dev) -- natural, middle-out (3,4,2,5,1,6,0,7:
# the order that spreads the experts' distinct B bytes most evenly over the rounds in a model of DRAM traffic), and
# descending -- one binary, in turns over the grouped set (bf16, fp16, tf32, e4m3); test_grouped under a reversed order.
#   run(carry=["build-s30x"], command="XDIR=build-s30x bash dev/gemm_sm90/run_s30_order.sh; tar czf $OUT/r.tgz -C /tmp/x .")
set -u
XDIR=${XDIR:-build-s30x}
. "$(dirname "$0")/../carried.sh"
unpack camel-base test_gpu_gemm
printf '#!/bin/sh\nexec /tmp/bin/camel-base "$@"\n' >/tmp/bin/camel-nat
printf '#!/bin/sh\nCML_SM90_GROUP_ORDER=3,4,2,5,1,6,0,7 exec /tmp/bin/camel-base "$@"\n' >/tmp/bin/camel-mid
printf '#!/bin/sh\nCML_SM90_GROUP_ORDER=7,6,5,4,3,2,1,0 exec /tmp/bin/camel-base "$@"\n' >/tmp/bin/camel-desc
chmod +x /tmp/bin/camel-nat /tmp/bin/camel-mid /tmp/bin/camel-desc
(CML_TEST_ONLY=test_grouped CML_SM90_GROUP_ORDER=4,3,2,1,0 timeout 200 /tmp/bin/test_gpu_gemm >$X/test_grouped_rev.log 2>&1;
 echo "rc $?" >>$X/test_grouped_rev.log)
stamp "test_grouped reversed: $(tail -1 $X/test_grouped_rev.log)"
in_turns ${ROUNDS:-4} "nat mid desc" bench gemm --dtype bf16,fp16,tf32,e4m3 --set grouped --reps 20
python3 dev/gemm_sm90/s20_summary.py $X nat mid desc >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
grep -h "per-problem" $X/bench_*_[34].txt
