#!/usr/bin/env bash
# Session 30: grouped launches with their problems in the kernel's parameters (param: up to 16 problems; pns: the same
# without the tile slots) against the problems in global memory (glob: -DCML_SM90_DEV_GLOBAL_GROUPS=1, the slots and
# the largest-first order) and the tree before the session (head: global memory, the caller's order, no slots); in
# turns over the grouped set (bf16, fp16, tf32, e4m3); then head and param over bf16 squares and GPT-2 (the extra
# kernel parameter of the launches that are not grouped). test_gpu_gemm whole; test_grouped under the sanitizers.
#   run(carry=["build-s30x"], command="XDIR=build-s30x bash dev/gemm_sm90/run_s30_param.sh; tar czf $OUT/r.tgz -C /tmp/x .")
set -u
XDIR=${XDIR:-build-s30x}
. "$(dirname "$0")/../carried.sh"
unpack
run_tests gemm
TOOLS="memcheck racecheck synccheck" sanitize /tmp/bin/test_gpu_gemm test_grouped
tests_summary
in_turns ${ROUNDS:-4} "head glob param pns" bench gemm --dtype bf16,fp16,tf32,e4m3 --set grouped --reps 20
python3 dev/gemm_sm90/s20_summary.py $X head glob param pns >$X/summary.txt 2>&1
cat $X/summary.txt
for v in head glob param pns; do echo "== $v"; grep -h "per-problem" $X/bench_${v}_*.txt | sort | uniq -c; done
mkdir -p $X/sq && X=$X/sq in_turns 2 "head param" bench gemm --dtype bf16,e4m3 --set square,gpt2 --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X/sq head param | tail -8
