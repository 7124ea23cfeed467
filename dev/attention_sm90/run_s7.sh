#!/bin/bash
# Session 7 device call (README.md "Session 7"): in one call, the harness variants (bwd_harness.cu,
# D = 128 and 64, S = ${HS:-2048 8192}, full and causal, bitwise against the pre-session kernel
# "lib") while the library tests and libcamel build in $B (niced); then test_gpu_attention_bwd90,
# compute-sanitizer racecheck / synccheck on it (CML_TEST_SANITIZER=1, CML_TEST_ONLY_D=128), the
# side-by-side bench at D = 128 (S = 2k..16k) and D = 64, and test_gpu_attention's backward
# tests (sweep, layouts). Every step has its timeout and is skipped once $DEADLINE seconds have
# passed, so that the logs come back. Logs under /tmp/x, tarred into $OUT/logs.tgz; the bench
# JSONs copied to $OUT; a summary printed last. Switches: HARNESS=0, LIB=0.
mkdir -p /tmp/x build-att
B=${B:-build-h7a-gpu}
DEADLINE=${DEADLINE:-380}
STEP_MIN=15
. "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > /tmp/x/gpu.txt 2>&1
if [ "${LIB:-1}" = 1 ]; then
  (cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake.txt 2>&1 &&
    nice -n 19 timeout 240 ninja -C $B -j12 test_gpu_attention_bwd90 test_gpu_attention camel_shared > /tmp/x/build.txt 2>&1
   echo "lib build rc=$? at ${SECONDS}s" >> /tmp/x/build.txt) &
  LIBPID=$!
fi
if [ "${HARNESS:-1}" = 1 ]; then
  for d in 64 128; do
    timeout 150 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=$d \
      dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/bwd$d > /tmp/x/nvcc$d.txt 2>&1 &
    eval "NV$d=$!"
  done
  wait $NV64 $NV128
  for d in 128 64; do step perf$d ${HT:-75} build-att/bwd$d perf ${HS:-2048 8192}; done
fi
[ -n "${LIBPID:-}" ] && wait $LIBPID
T=$B/tests/test_gpu_attention_bwd90
step test_bwd90 90 $T
export CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=128
step san_racecheck 80 compute-sanitizer --tool racecheck --error-exitcode 9 $T
step san_synccheck 60 compute-sanitizer --tool synccheck --error-exitcode 9 $T
unset CML_TEST_SANITIZER CML_TEST_ONLY_D
cd bench
step bench128 110 python3 attention_side_by_side.py --lib ../$B/src/libcamel.so --d 128 --s 2048,4096,8192,16384 \
  --reps 10 --json /tmp/x/bench128.json
step bench64 70 python3 attention_side_by_side.py --lib ../$B/src/libcamel.so --d 64 --s 2048,8192 --reps 10 \
  --json /tmp/x/bench64.json
cd ..
CML_TEST_ONLY=test_sweep step test_att_sweep 60 $B/tests/test_gpu_attention
CML_TEST_ONLY=test_layouts step test_att_layouts 40 $B/tests/test_gpu_attention
cp /tmp/x/bench128.json /tmp/x/bench64.json $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz -C /tmp/x .
cat /tmp/x/gpu.txt
grep -E "rc=|error|C7520" /tmp/x/build.txt 2>/dev/null | head -5
for d in 64 128; do grep -E "error|C7520|spill" /tmp/x/nvcc$d.txt 2>/dev/null | grep -v " 0 bytes spill" | cut -c1-100 | head -4; done
for d in 128 64; do
  [ -f /tmp/x/perf$d.txt ] || continue
  grep -E "DIFFERS|rc=|failures" /tmp/x/perf$d.txt; grep -E "\| bwd" /tmp/x/perf$d.txt | cut -c1-105
done
for f in test_bwd90 test_att_sweep test_att_layouts; do grep -E "FAIL|failed|passed|rc=|skipped" /tmp/x/$f.txt | head -6; done
for f in san_racecheck san_synccheck; do grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|passed|failed|skipped" /tmp/x/$f.txt | head -5; done
for f in bench128 bench64; do grep -E "^fwd|rc=|target|skipped" /tmp/x/$f.txt; done
