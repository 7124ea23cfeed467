#!/usr/bin/env bash
# Session 14's verification of the PDL rollout + the phased f32 loops as merged (0d6a92b, then the final HEAD): the tree built for sm_90a
# with -Werror, every GPU test (ctest -L gpu), the exact-f32 GEMM record (squares + GPT-2 against cuBLAS sgemm), and
# the AdamW record (bench_adamw + torch_adamw.py: AdamW now launches with PDL).
#   bash dev/s14_verify.sh; tar czf $OUT/logs.tgz -C /tmp/v14 .          (run: timeout_s 600)
set -u
L=/tmp/v14; mkdir -p $L; t0=$(date +%s); B=build-v14
at() { echo "$(( $(date +%s)-t0 ))s"; }
T() { local s=$(( 585 - ($(date +%s)-t0) )); [ $s -gt $1 ] && echo $1 || echo $s; }
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null && timeout 250 cmake --build $B -j16) > $L/build.log 2>&1
echo "build rc=$? $(at); C75xx: $(grep -oE 'C75[0-9]+' $L/build.log | sort | uniq -c | tr '\n' ' ')"
grep -E "spill" $L/build.log | sed 's/.*function//' | sort -u | head -8
timeout $(T 240) ctest --test-dir $B -L gpu -j4 --timeout 230 > $L/ctest.log 2>&1; echo "ctest gpu rc=$? $(at)"
grep -E "tests passed|Failed|\*\*\*|Not Run" $L/ctest.log | head -20
timeout $(T 120) $B/apps/camel/camel bench gemm --dtype f32 --set square,gpt2 --sizes 2048,4096,8192 --reps 20 \
   --json $L/gemm_h100_f32.json > $L/gemm_f32.log 2>&1; echo "gemm f32 bench rc=$? $(at)"
(timeout $(T 60) $B/bench/bench_adamw --json $L/adamw_ours.json > $L/bench_adamw.log 2>&1 &&
 timeout $(T 60) python3 bench/torch_adamw.py --json $L/adamw_torch.json > $L/torch_adamw.log 2>&1 &&
 python3 bench/torch_adamw.py --combine $L/adamw_ours.json $L/adamw_torch.json --out $L/adamw_h100.json > $L/adamw_table.md 2>&1)
echo "adamw rc=$? $(at)"
grep -E "f32 " $L/gemm_f32.log | head -30
grep -A6 "^summary" $L/gemm_f32.log
cat $L/adamw_table.md | tail -8
echo "total $(at)"
