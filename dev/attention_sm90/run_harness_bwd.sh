#!/bin/bash
# One device call for the backward ladder's harness (bwd_harness.cu, README.md "Backward"): builds
# build-att/bwd64 and bwd128 in parallel (and, in the background, the library test with LIB=1),
# runs `perf` on each (S = ${HS:-512 2048 8192}), then optionally test_gpu_attention_bwd90.
# Logs under /tmp/x, tarred into $OUT/logs.tgz; the tables printed last.
mkdir -p /tmp/x build-att
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > /tmp/x/gpu.txt 2>&1
if [ -n "${LIB:-}" ]; then
  (cmake -S . -B build-bwd90-gpu -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=OFF > /tmp/x/cmake.txt 2>&1 &&
   timeout 250 ninja -C build-bwd90-gpu -j12 test_gpu_attention_bwd90 > /tmp/x/build.txt 2>&1; echo "lib build rc=$?" >> /tmp/x/build.txt) &
  LIBPID=$!
fi
for d in 64 128; do
  timeout 150 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=$d \
    dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/bwd$d > /tmp/x/nvcc$d.txt 2>&1 &
done
wait $(jobs -p | grep -v "^${LIBPID:-x}$") 2>/dev/null
for d in 64 128; do
  timeout ${HT:-90} build-att/bwd$d perf ${HS:-512 2048 8192} > /tmp/x/perf$d.txt 2>&1; echo "perf$d rc=$?" >> /tmp/x/perf$d.txt
done
if [ -n "${LIB:-}" ]; then
  wait $LIBPID
  timeout ${TEST_T:-120} build-bwd90-gpu/tests/test_gpu_attention_bwd90 > /tmp/x/test.txt 2>&1; echo "test rc=$?" >> /tmp/x/test.txt
  for tool in ${SAN:-}; do
    CML_TEST_SANITIZER=1 timeout ${SAN_T:-90} compute-sanitizer --tool $tool --error-exitcode 9 build-bwd90-gpu/tests/test_gpu_attention_bwd90 > /tmp/x/san_$tool.txt 2>&1
    echo "sanitizer $tool rc=$?" >> /tmp/x/san_$tool.txt
  done
fi
tar czf $OUT/logs.tgz -C /tmp/x .
cat /tmp/x/gpu.txt
for d in 64 128; do grep -E "error|spill" /tmp/x/nvcc$d.txt | grep -v " 0 bytes spill" | head -5; done
for d in 64 128; do grep -E "DIFFERS|rc=|failures" /tmp/x/perf$d.txt; grep -E "\| bwd" /tmp/x/perf$d.txt; done
for d in 64 128; do grep -A5 "profile" /tmp/x/perf$d.txt | cut -c1-1200; done
grep -E "rc=|FAIL|passed|failed" /tmp/x/build.txt /tmp/x/test.txt 2>/dev/null | tail -8
for tool in ${SAN:-}; do grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" /tmp/x/san_$tool.txt | head -4; done
