#!/usr/bin/env bash
# Session 14's verification call for the D = 256 PRO merge (82f3bda: PF stripped, SK = 512): the tree built for
# sm_90a (-Werror), every GPU test; the attention side by side at S = 512 / 1k / 2k for D = 256 (both), and at
# S = 512 / 1k for D = 64 / 128 (the short-S record); the tf32 + bf16 GEMM record on squares and GPT-2 (the first
# whole-set JSON after session 13's tf32 register-operand step).
#   bash dev/s14_check.sh; tar czf $OUT/logs.tgz -C /tmp f14          (run: timeout_s 600)
set -u
L=/tmp/f14; mkdir -p $L; t0=$(date +%s); B=build-f14
at() { echo "$(( $(date +%s)-t0 ))s"; }
T() { local s=$(( 585 - ($(date +%s)-t0) )); [ $s -gt $1 ] && echo $1 || echo $s; }
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null && timeout 250 cmake --build $B -j16) > $L/build.log 2>&1
echo "build rc=$? $(at); C75xx: $(grep -oE 'C75[0-9]+' $L/build.log | sort | uniq -c | tr '\n' ' ')"
grep -E "spill" $L/build.log | sed 's/.*function//' | sort -u | head -6
timeout $(T 230) ctest --test-dir $B -L gpu -j4 --timeout 220 > $L/ctest.log 2>&1; echo "ctest gpu rc=$? $(at)"
grep -E "tests passed|Failed|\*\*\*|Not Run" $L/ctest.log | head -20
grep -h "PRO\|QSHIFT" $B/Testing/Temporary/LastTest.log 2>/dev/null | grep -i "predicted" | head -4
(cd bench && timeout $(T 100) python3 attention_side_by_side.py --lib ../$B/src/libcamel.so --d 64,128,256 --s 512,1024 \
   --causal both --ops fwd,fwd_bwd --reps 10 --json $L/attention_h100_short.json) > $L/att.log 2>&1; echo "attention short rc=$? $(at)"
timeout $(T 120) $B/apps/camel/camel bench gemm --dtype tf32,bf16 --set square,gpt2 --sizes 2048,4096,8192,16384 --reps 20 \
   --json $L/gemm_h100_tf32_bf16.json > $L/gemm.log 2>&1; echo "gemm bench rc=$? $(at)"
grep -E "^(fwd|fwd_bwd) " $L/att.log
grep -A8 "^summary\|geomean" $L/gemm.log | head -20
echo "total $(at)"
