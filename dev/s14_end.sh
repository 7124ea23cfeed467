#!/usr/bin/env bash
# Session 14's closing device call on the final tree: the -Werror sm_90a build, every GPU test (ctest -L gpu), the
# exact-f32 GEMM and AdamW records, and GPT training with programmatic dependent launch on and off (CML_PDL=0) in
# turns: tokens/s and the final losses (the same bits expected: PDL changes when kernels start, not what they compute).
#   bash dev/s14_end.sh; tar czf $OUT/logs.tgz -C /tmp/e14 .          (run: timeout_s 600)
set -u
L=/tmp/e14; mkdir -p $L; t0=$(date +%s); B=build-e14
at() { echo "$(( $(date +%s)-t0 ))s"; }
T() { local s=$(( 585 - ($(date +%s)-t0) )); [ $s -gt $1 ] && echo $1 || echo $s; }
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null && timeout 250 cmake --build $B -j16) > $L/build.log 2>&1
echo "build rc=$? $(at); C75xx: $(grep -oE 'C75[0-9]+' $L/build.log | sort | uniq -c | tr '\n' ' ')"
timeout $(T 240) ctest --test-dir $B -L gpu -j4 --timeout 230 > $L/ctest.log 2>&1; echo "ctest gpu rc=$? $(at)"
grep -E "tests passed|Failed|\*\*\*|Not Run" $L/ctest.log | head -20
timeout $(T 60) $B/apps/camel/camel bench gemm --dtype f32 --set square,gpt2 --sizes 2048,4096,8192 --reps 20 \
   --json $L/gemm_h100_f32.json > $L/gemm_f32.log 2>&1; echo "gemm f32 bench rc=$? $(at)"
(timeout $(T 40) $B/bench/bench_adamw --json $L/adamw_ours.json > $L/bench_adamw.log 2>&1 &&
 timeout $(T 60) python3 bench/torch_adamw.py --json $L/adamw_torch.json > $L/torch_adamw.log 2>&1 &&
 python3 bench/torch_adamw.py --combine $L/adamw_ours.json $L/adamw_torch.json --out $L/adamw_h100.json > $L/adamw_table.md 2>&1)
echo "adamw rc=$? $(at)"
# training, PDL on / off in turns (2 rounds): gpt2-124m (30 steps of 8 x 1024 tokens) and char-mini (300 steps)
for r in 1 2; do
  for v in on off; do
    env=""; [ $v = off ] && env="CML_PDL=0"
    env $env timeout $(T 60) $B/apps/camel/camel train gpt --preset gpt2-124m --device cuda --steps 30 --eval-every 30 \
        --eval-iters 2 --sample-every 0 > $L/train_gpt2_${v}_$r.log 2>&1
    env $env timeout $(T 60) $B/apps/camel/camel train gpt --preset char-mini --device cuda --steps 300 --eval-every 300 \
        --eval-iters 2 --sample-every 0 > $L/train_mini_${v}_$r.log 2>&1
    echo "train round $r PDL $v $(at)"
  done
done
for f in $L/train_*.log; do echo "$(basename $f .log): $(grep '^final:' $f)"; done
grep -E "f32 " $L/gemm_f32.log | head -20
grep -A3 "^summary" $L/gemm_f32.log
tail -5 $L/adamw_table.md
echo "total $(at)"
