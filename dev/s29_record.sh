#!/usr/bin/env bash
# Session 29, end: dev/s20_verify.sh (the whole tree for sm_90a with -Werror, ctest -L gpu, the bf16 / fp16 / tf32
# GEMM record of the GPT-2 set and squares 1024-16384 into $OUT/gemm_h100_session29.json), then with the same build
# the odd, batched and grouped sets (bf16, fp16, tf32, e4m3) and the e4m3 squares 2048-8192
# ($OUT/gemm_h100_session29_other.json).
#   run(command="COMMIT=<short hash> bash dev/s29_record.sh", timeout_s=600)
set -u
T0=$(date +%s)
SESSION=${SESSION:-29} bash dev/s20_verify.sh
B=build-verify
timeout 120 $B/apps/camel/camel bench gemm --dtype bf16,fp16,tf32,e4m3 --set odd,batched,grouped --reps 20 \
    --json ${OUT:-/tmp}/gemm_h100_session${SESSION:-29}_other.json --commit "${COMMIT:-unknown}" >${OUT:-/tmp}/other.txt 2>&1
echo "other sets rc $? at $(( $(date +%s) - T0 )) s"
timeout 60 $B/apps/camel/camel bench gemm --dtype e4m3 --set square --sizes 2048,4096,8192 --reps 20 \
    --json ${OUT:-/tmp}/gemm_h100_session${SESSION:-29}_e4m3.json --commit "${COMMIT:-unknown}" >${OUT:-/tmp}/e4m3.txt 2>&1
echo "e4m3 rc $? at $(( $(date +%s) - T0 )) s"
grep -h "per-problem\|cases " ${OUT:-/tmp}/other.txt ${OUT:-/tmp}/e4m3.txt
grep -h "e4m3" ${OUT:-/tmp}/e4m3.txt | grep gemm
