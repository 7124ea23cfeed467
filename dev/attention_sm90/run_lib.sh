#!/bin/bash
# Device: build test_gpu_attention in build-att and run it (optionally under compute-sanitizer).
#   SAN=1 dev/attention_sm90/run_lib.sh      logs under /tmp/x (tarred by the caller)
mkdir -p /tmp/x
cmake -S . -B build-att -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake.txt 2>&1 &&
  timeout ${BUILD_T:-300} cmake --build build-att --target test_gpu_attention > /tmp/x/build.txt 2>&1
echo "build rc=$?"; grep -E "error|warning: " /tmp/x/build.txt | grep -v C7519 | head -10
T=build-att/tests/test_gpu_attention
timeout ${TEST_T:-300} $T > /tmp/x/test.txt 2>&1; echo "test rc=$?"
grep -E "FAIL|sm90 forward|timing|passed|checks" /tmp/x/test.txt | head -30
if [ -n "$SAN" ]; then
  for tool in memcheck racecheck; do
    CML_TEST_SANITIZER=1 timeout ${SAN_T:-200} compute-sanitizer --tool $tool --error-exitcode 9 $T > /tmp/x/san_$tool.txt 2>&1
    echo "sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|FAIL|sm90 forward|RACECHECK SUMMARY" /tmp/x/san_$tool.txt | head -5
  done
fi
