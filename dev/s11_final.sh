#!/usr/bin/env bash
# Session 11's last device call: the final tree built for sm_90a (-Werror), every GPU test, then the
# attention side by side for every D (bench/results/attention_h100.json) and the bf16 GEMM benchmark
# (GPT-2 shapes and squares: the squares were not re-run after session 10's epilogue diet).
#   COMMIT=<sha> bash dev/s11_final.sh                          (run: timeout_s 600)
set -u
L=/tmp/f11; mkdir -p $L; t0=$(date +%s); B=build-f11; c=${COMMIT:-unknown}
at() { echo "$(( $(date +%s)-t0 ))s"; }
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null && timeout 250 cmake --build $B -j16) > $L/build.log 2>&1
echo "build rc=$? $(at); C75xx: $(grep -oE 'C75[0-9]+' $L/build.log | sort | uniq -c | tr '\n' ' ')"
timeout 200 ctest --test-dir $B -L gpu -j4 --timeout 190 > $L/ctest.log 2>&1; echo "ctest gpu rc=$? $(at)"
grep -E "tests passed|Failed|\*\*\*|Not Run" $L/ctest.log | head -20
(cd bench && timeout 220 python3 attention_side_by_side.py --lib ../$B/src/libcamel.so --d 64,128,256 --s 2048,4096,8192,16384 \
   --causal both --ops fwd,fwd_bwd --reps 10 --json $OUT/attention_h100.json) > $L/att.log 2>&1; echo "attention rc=$? $(at)"
s=$(( 570 - ($(date +%s)-t0) ))
if [ $s -gt 40 ]; then
  timeout $s $B/apps/camel/camel bench gemm --dtype bf16 --set gpt2,square --sizes 2048,4096,8192,16384 --reps 30 --commit $c \
     --json $OUT/gemm_bf16.json > $L/gemm.log 2>&1; echo "bench gemm rc=$? $(at)"
  grep -A4 -i "summary\|geomean" $L/gemm.log | head -12
fi
tar czf $OUT/f11_logs.tgz -C $L .
grep -E "^(fwd|fwd_bwd) " $L/att.log
echo "total $(at)"
