#!/bin/bash
# One device call for the backward's prep / convert kernels (README.md, "Backward", session 6):
# builds bwd_edge_harness.cu (new kernels against the old ones, bitwise, and timed) while the
# library's tests and camel build in the background; runs the harness, ncu SpeedOfLight on one
# launch of each version, test_gpu_attention_bwd90, camel bench attention + bwd_table.py,
# test_gpu_attention, compute-sanitizer memcheck (CML_TEST_SANITIZER=1) as the time guard
# (LIMIT seconds, default 280) allows. Logs under /tmp/x, tarred into $OUT/logs.tgz.
LIMIT=${LIMIT:-280}
left() { echo $((LIMIT - SECONDS)); }
mkdir -p /tmp/x build-att
B=${B:-build-bwd90-gpu} # reuses a warm machine's build of run_bwd.sh when there is one
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > /tmp/x/gpu.txt 2>&1
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=OFF > /tmp/x/cmake.txt 2>&1 &&
  timeout 200 ninja -C $B -j15 -k 0 test_gpu_attention_bwd90 test_gpu_attention camel > /tmp/x/build.txt 2>&1
  echo "build rc=$? at ${SECONDS}s" >> /tmp/x/build.txt) &
LIBPID=$!
timeout 100 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v \
  dev/attention_sm90/bwd_edge_harness.cu -o build-att/bwd_edge > /tmp/x/nvcc_edge.txt 2>&1
echo "nvcc rc=$?" >> /tmp/x/nvcc_edge.txt
timeout 60 build-att/bwd_edge > /tmp/x/edge.txt 2>&1; echo "edge rc=$?" >> /tmp/x/edge.txt
timeout 60 ncu --clock-control none -k regex:'att90b_(prep|dq)' -c 8 --section SpeedOfLight \
  build-att/bwd_edge ncu > /tmp/x/ncu.txt 2>&1; echo "ncu rc=$?" >> /tmp/x/ncu.txt
wait $LIBPID
T=$B/tests
[ $(left) -gt 40 ] && { timeout $(( $(left) < 120 ? $(left) - 20 : 120 )) $T/test_gpu_attention_bwd90 > /tmp/x/test90.txt 2>&1; echo "test90 rc=$? at ${SECONDS}s" >> /tmp/x/test90.txt; }
[ $(left) -gt 40 ] && { timeout 60 $B/apps/camel/camel bench attention --d 64,128 --s 512,2048,8192 --reps 10 \
  --max-case-seconds 4 --json /tmp/x/bench.json > /tmp/x/bench.txt 2>&1; echo "bench rc=$? at ${SECONDS}s" >> /tmp/x/bench.txt;
  python3 dev/attention_sm90/bwd_table.py /tmp/x/bench.json > /tmp/x/table.txt 2>&1; }
[ $(left) -gt 25 ] && { timeout $(( $(left) - 15 )) $T/test_gpu_attention > /tmp/x/testatt.txt 2>&1; echo "testatt rc=$? at ${SECONDS}s" >> /tmp/x/testatt.txt; }
[ $(left) -gt 25 ] && { CML_TEST_SANITIZER=1 timeout $(( $(left) - 10 )) compute-sanitizer --tool memcheck --error-exitcode 9 \
  $T/test_gpu_attention_bwd90 > /tmp/x/memcheck.txt 2>&1; echo "memcheck rc=$? at ${SECONDS}s" >> /tmp/x/memcheck.txt; }
tar czf $OUT/logs.tgz -C /tmp/x .
cat /tmp/x/gpu.txt
grep -E "rc=|error" /tmp/x/nvcc_edge.txt | head -5; grep -A1 -E "att90b_(prep|dq)" /tmp/x/nvcc_edge.txt | grep -E "spill|registers" | grep -v " 0 bytes spill" | head -8
grep -E "FAIL|failures|rc=" /tmp/x/edge.txt; grep -c "bitwise equal" /tmp/x/edge.txt; grep -E "^perf" /tmp/x/edge.txt
grep -E "att90b_(prep|dq)|Duration|DRAM Throughput|Memory Throughput" /tmp/x/ncu.txt | sed 's/(CUtensorMap.*//' | cut -c1-110; grep "rc=" /tmp/x/ncu.txt
grep -E "rc=|error:" /tmp/x/build.txt | head -5
grep -E "FAIL|failed|passed|sm90 backward|determinism|rc=" /tmp/x/test90.txt 2>/dev/null | head -12
cat /tmp/x/table.txt 2>/dev/null; grep "rc=" /tmp/x/bench.txt 2>/dev/null
grep -E "FAIL|failed|passed|rc=" /tmp/x/testatt.txt 2>/dev/null | tail -4
grep -E "ERROR SUMMARY|rc=|failed|passed" /tmp/x/memcheck.txt 2>/dev/null | tail -4
