#!/usr/bin/env bash
# Session 30: the grouped set (bf16, fp16, tf32, e4m3) in turns over the carried camel-<variant> binaries (VARIANTS,
# in that order), after test_gpu_gemm whole and test_grouped under memcheck / racecheck / synccheck. Dev switches of the
# session's intermediate trees, since removed: ORDER (CML_SM90_GROUP_ORDER, the problems' visiting order, e.g.
# 7,6,5,4,3,2,1,0) and SHB=1 (CML_BENCH_DEV_SHARED_B: one more pass with every problem reading one B). The runs of
# dev/gemm_sm90/README.md, session 30 (results in s30_results/<name>_summary.txt):
#   slot:  VARIANTS="noslot slot noacq" ORDER=7,6,5,4,3,2,1,0 SHB=1     pfd:  VARIANTS="noslot slot pfd" (same)
#   param: VARIANTS="head glob param pns"   async: VARIANTS="head param pns"   head: VARIANTS="prev ehead"
#   run(carry=["build-s30x"], command="VARIANTS='prev ehead' XDIR=build-s30x bash dev/gemm_sm90/run_s30_grouped.sh;
#       tar czf $OUT/r.tgz -C /tmp/x .")
set -u
XDIR=${XDIR:-build-s30x}
. "$(dirname "$0")/../carried.sh"
unpack
run_tests gemm
TOOLS="memcheck racecheck synccheck" sanitize /tmp/bin/test_gpu_gemm test_grouped
tests_summary
shb=""
for v in $VARIANTS; do
    mv /tmp/bin/camel-$v /tmp/bin/camel-$v.bin
    printf '#!/bin/sh\nCML_SM90_GROUP_ORDER=%s exec /tmp/bin/camel-%s.bin "$@"\n' "${ORDER:-}" $v >/tmp/bin/camel-$v
    printf '#!/bin/sh\nCML_BENCH_DEV_SHARED_B=1 CML_SM90_GROUP_ORDER=%s exec /tmp/bin/camel-%s.bin "$@"\n' "${ORDER:-}" \
        $v >/tmp/bin/camel-shb$v
    chmod +x /tmp/bin/camel-$v /tmp/bin/camel-shb$v
    shb="$shb shb$v"
done
in_turns ${ROUNDS:-4} "$VARIANTS" bench gemm --dtype bf16,fp16,tf32,e4m3 --set grouped --reps 20
[ "${SHB:-0}" = 1 ] && in_turns 1 "$shb" bench gemm --dtype bf16,fp16,tf32,e4m3 --set grouped --reps 20
python3 dev/gemm_sm90/s20_summary.py $X $VARIANTS >$X/summary.txt 2>&1
cat $X/summary.txt
for v in $VARIANTS $([ "${SHB:-0}" = 1 ] && echo $shb); do
    echo "== $v"
    grep -h "per-problem" $X/bench_${v}_*.txt | sort | uniq -c
done
