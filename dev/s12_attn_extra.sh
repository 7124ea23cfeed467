#!/usr/bin/env bash
# Session 12: what issue 6 still asks of the new backward kernels and of the short sequences -- the side by side at
# S = 512 / 1k (forward >= 1.5x FA2 "everywhere"), the determinism loops (1000 runs at D = 128 and D = 256), and the
# constant-time check at D = 256 (the pair-K backward) and at D = 128 S = 16k (ascending claims).
#   bash dev/s12_attn_extra.sh; tar czf $OUT/logs.tgz -C /tmp e12         (run: timeout_s 600)
set -u
L=/tmp/e12; mkdir -p $L; t0=$(date +%s); B=build-e12
at() { echo "$(( $(date +%s)-t0 ))s"; }
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null &&
 timeout 250 cmake --build $B -j16 --target camel camel_shared test_gpu_attention_bwd90) > $L/build.log 2>&1
echo "build rc=$? $(at)"
(cd bench && timeout 120 python3 attention_side_by_side.py --lib ../$B/src/libcamel.so --d 64,128,256 --s 512,1024 \
   --causal both --ops fwd,fwd_bwd --reps 10 --json $L/attention_h100_short.json) > $L/att.log 2>&1; echo "attention short rc=$? $(at)"
timeout 100 $B/tests/test_gpu_attention_bwd90 > $L/bwd90.txt 2>&1; echo "bwd90 rc=$? $(at)"; grep -E "determinism|tests passed" $L/bwd90.txt
for s in 4,2048,8,256 1,16384,16,128; do
  left=$(( 585 - ($(date +%s)-t0) )); [ $left -gt 30 ] || { echo "$s skipped (time)"; continue; }
  timeout $left $B/apps/camel/camel bench attention --timing-check --tc-shape $s --json $L/tc_$s.json > $L/tc_$s.log 2>&1
  echo "timing $s rc=$? $(at)"; tail -9 $L/tc_$s.log
done
grep -E "^(fwd|fwd_bwd) " $L/att.log
echo "total $(at)"
