#!/usr/bin/env bash
# (Binaries from intermediate trees of session 30 whose dev switches -- CML_SM90_GROUP_ORDER, CML_BENCH_DEV_SHARED_B,
# CML_SM90_DEV_NOACQ / NOPFD -- were removed with the final form; dev/gemm_sm90/README.md, session 30.)
# Session 30: the grouped launch's tile slots (the producer hands each tile's place to the consumers in shared memory,
# and prefetches the problem's epilogue fields into L1) against the consumers' own walk (noslot: -DCML_SM90_GROUP_SLOT=0),
# and slot without the tensor maps' acquire fences (noacq: diagnostic only), all with the descending problem order; in
# turns over the grouped set (bf16, fp16, tf32, e4m3), then each once with every problem reading one B. test_grouped
# whole and under memcheck / racecheck / synccheck first.
#   run(carry=["build-s30x"], command="XDIR=build-s30x bash dev/gemm_sm90/run_s30_slot.sh; tar czf $OUT/r.tgz -C /tmp/x .")
set -u
XDIR=${XDIR:-build-s30x}
. "$(dirname "$0")/../carried.sh"
unpack
run_tests gemm
TOOLS="memcheck racecheck synccheck" sanitize /tmp/bin/test_gpu_gemm test_grouped
tests_summary
for v in slot noslot noacq; do
    mv /tmp/bin/camel-$v /tmp/bin/camel-$v.bin
    printf '#!/bin/sh\nCML_SM90_GROUP_ORDER=7,6,5,4,3,2,1,0 exec /tmp/bin/camel-%s.bin "$@"\n' $v >/tmp/bin/camel-$v
    printf '#!/bin/sh\nCML_BENCH_DEV_SHARED_B=1 CML_SM90_GROUP_ORDER=7,6,5,4,3,2,1,0 exec /tmp/bin/camel-%s.bin "$@"\n' $v >/tmp/bin/camel-shb$v
    chmod +x /tmp/bin/camel-$v /tmp/bin/camel-shb$v
done
in_turns ${ROUNDS:-4} "noslot slot noacq" bench gemm --dtype bf16,fp16,tf32,e4m3 --set grouped --reps 20
in_turns 1 "shbnoslot shbslot shbnoacq" bench gemm --dtype bf16,fp16,tf32,e4m3 --set grouped --reps 20
python3 dev/gemm_sm90/s20_summary.py $X noslot slot noacq >$X/summary.txt 2>&1
cat $X/summary.txt
for v in noslot slot noacq shbnoslot shbslot shbnoacq; do echo "== $v"; grep -h "per-problem" $X/bench_${v}_*.txt | sort | uniq -c; done
