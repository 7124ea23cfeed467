#!/usr/bin/env bash
# Session 11: the attention constant-time check (issue 6 item 5) on today's kernels, every head dim (session 4
# measured D = 128 only): build camel (sm_90a), then `camel bench attention --timing-check` at hidden 2048,
# B S = 8k tokens: D = 64 (B 4, S 2048, H 32), D = 128 (B 4, S 2048, H 16), D = 256 (B 4, S 2048, H 8).
#   COMMIT=<sha> bash dev/s11_timing.sh                                   (run: timeout_s 600)
set -u
L=/tmp/t11; mkdir -p $L; t0=$(date +%s); B=build-t11; c=${COMMIT:-unknown}
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null && timeout 300 cmake --build $B -j16 --target camel) > $L/build.log 2>&1
echo "build rc=$? $(( $(date +%s)-t0 ))s"
for s in 4,2048,32,64 4,2048,16,128 4,2048,8,256; do
  left=$(( 580 - ($(date +%s)-t0) )); [ $left -gt 30 ] || { echo "$s skipped (time)"; continue; }
  d=${s##*,}
  timeout $left $B/apps/camel/camel bench attention --timing-check --tc-shape $s --commit $c --json $OUT/attention_timing_d$d.json > $L/tc_d$d.log 2>&1
  echo "D=$d rc=$? $(( $(date +%s)-t0 ))s"; tail -12 $L/tc_d$d.log
done
