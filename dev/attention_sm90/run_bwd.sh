#!/bin/bash
# One device call for the sm90 backward (README.md, "Backward"): build test_gpu_attention_bwd90
# and camel in build-bwd90-gpu, run the test, optionally compute-sanitizer on it
# (CML_TEST_SANITIZER=1: the small cases), then `camel bench attention` (fwd and fwd+bwd through
# the public API) and the table against cuDNN (bwd_table.py). Logs under /tmp/x, tarred into
# $OUT/logs.tgz; a short summary printed last.
#   SAN="memcheck racecheck synccheck" BENCH_D=64,128 BENCH_S=512,2048,8192 dev/attention_sm90/run_bwd.sh
mkdir -p /tmp/x
B=build-bwd90-gpu
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > /tmp/x/gpu.txt 2>&1
cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=OFF > /tmp/x/cmake.txt 2>&1 &&
  timeout ${BUILD_T:-200} ninja -C $B -j16 -k 0 test_gpu_attention_bwd90 camel > /tmp/x/build.txt 2>&1
echo "build rc=$?" | tee /tmp/x/build_rc.txt
grep -E "error|warning: |C7520|spill" /tmp/x/build.txt | grep -v "0 bytes spill" | head -10
T=$B/tests/test_gpu_attention_bwd90
timeout ${TEST_T:-150} $T > /tmp/x/test.txt 2>&1; echo "test rc=$?" >> /tmp/x/test.txt
for tool in ${SAN:-}; do
  CML_TEST_SANITIZER=1 timeout ${SAN_T:-90} compute-sanitizer --tool $tool --error-exitcode 9 $T > /tmp/x/san_$tool.txt 2>&1
  echo "sanitizer $tool rc=$?" >> /tmp/x/san_$tool.txt
done
if [ -n "${BENCH_D:-}" ]; then
  timeout ${BENCH_T:-120} $B/apps/camel/camel bench attention --d $BENCH_D --s ${BENCH_S:-512,1024,2048,4096,8192,16384} \
    --reps ${REPS:-10} --max-case-seconds 4 --json /tmp/x/bench.json > /tmp/x/bench.txt 2>&1
  echo "bench rc=$?" >> /tmp/x/bench.txt
  python3 dev/attention_sm90/bwd_table.py /tmp/x/bench.json > /tmp/x/table.txt 2>&1
fi
if [ -n "${NCU:-}" ]; then # one main-kernel launch each, non-causal and causal, at D=${NCU_D:-128} S=${NCU_S:-2048}
  for c in no yes; do
    timeout ${NCU_T:-60} ncu --clock-control none -k regex:att90b_kernel -c 1 --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis_Tables \
      $B/apps/camel/camel bench attention --d ${NCU_D:-128} --s ${NCU_S:-2048} --causal $c --reps 1 > /tmp/x/ncu_$c.txt 2>&1
  done
fi
tar czf $OUT/logs.tgz -C /tmp/x .
cat /tmp/x/gpu.txt
grep -E "FAIL|failed|passed|sm90 backward|determinism|test rc|Error|error" /tmp/x/test.txt | head -30
for tool in ${SAN:-}; do grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|FAIL|failed|passed" /tmp/x/san_$tool.txt | head -6; done
tail -3 /tmp/x/bench.txt 2>/dev/null
cat /tmp/x/table.txt 2>/dev/null
for c in no yes; do grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Shared|Tensor|Stall|Issue Slots|Executed Ipc" /tmp/x/ncu_$c.txt 2>/dev/null | head -14; done
