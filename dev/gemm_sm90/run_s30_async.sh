#!/usr/bin/env bash
# Session 30: the tile slots stored by st.async (completing on the stage's full barrier; the st.shared form of the slots
# made racecheck report the slot reads), the problems in the kernel's parameters (param) against the same without slots
# (pns) and the tree before the session (head); test_gpu_gemm whole, test_grouped under the sanitizers; the grouped set
# in turns.
#   run(carry=["build-s30x"], command="XDIR=build-s30x bash dev/gemm_sm90/run_s30_async.sh; tar czf $OUT/r.tgz -C /tmp/x .")
set -u
XDIR=${XDIR:-build-s30x}
. "$(dirname "$0")/../carried.sh"
unpack
run_tests gemm
TOOLS="memcheck racecheck synccheck" sanitize /tmp/bin/test_gpu_gemm test_grouped
tests_summary
in_turns ${ROUNDS:-4} "head param pns" bench gemm --dtype bf16,fp16,tf32,e4m3 --set grouped --reps 20
python3 dev/gemm_sm90/s20_summary.py $X head param pns >$X/summary.txt 2>&1
cat $X/summary.txt
for v in head param pns; do echo "== $v"; grep -h "per-problem" $X/bench_${v}_*.txt | sort | uniq -c; done
