#!/bin/bash
# One device call for the forward's short-sequence / D = 64 work (v8): builds the dev harness
# (fwd_harness.cu) and, in the background, libcamel + test_gpu_attention (build-fwd-gpu); then
#   1. fatt check on the v8 variants (float64 reference, repeat bitwise, poisoned O)
#   2. fatt turns: the variants in turns per shape (TURNS_D, TURNS_S, both causal modes)
#   3. test_gpu_attention (SAN=1: also compute-sanitizer memcheck on it, CML_TEST_SANITIZER=1)
#   4. bench/attention_side_by_side.py --ops fwd on SBS_A and SBS_B ("--d .. --s .." each)
# Logs under /tmp/x, tarred into $OUT/logs.tgz; a summary printed last.
mkdir -p /tmp/x build-fwd
T0=$SECONDS
( cmake -S . -B build-fwd-gpu -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a > /tmp/x/cmake.txt 2>&1 &&
  ninja -C build-fwd-gpu -j14 camel_shared test_gpu_attention > /tmp/x/build.txt 2>&1
  echo "lib build rc=$? at $((SECONDS - T0)) s" > /tmp/x/build_rc.txt ) &
BPID=$!
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v \
  dev/attention_sm90/fwd_harness.cu -lcuda -o build-fwd/fatt > /tmp/x/harness_build.txt 2>&1
echo "harness build rc=$? at $((SECONDS - T0)) s"
if [ -n "$CHECK_V" ]; then timeout 90 build-fwd/fatt check $CHECK_V > /tmp/x/check.txt 2>&1; echo "check rc=$?"; fi
for D in ${TURNS_D:-64 128 256}; do for S in ${TURNS_S:-512 1024 2048 8192}; do for c in 0 1; do
  timeout 20 build-fwd/fatt turns $D $S $c ${TURNS_V} >> /tmp/x/turns.txt 2>&1
done; done; done
echo "turns done at $((SECONDS - T0)) s"
wait $BPID; cat /tmp/x/build_rc.txt; grep -E "error|C7520" /tmp/x/build.txt | head -5
T=build-fwd-gpu/tests/test_gpu_attention
timeout ${TEST_T:-100} $T > /tmp/x/test.txt 2>&1; echo "test rc=$? at $((SECONDS - T0)) s"
if [ -n "$SAN" ]; then
  CML_TEST_SANITIZER=1 timeout ${SAN_T:-120} compute-sanitizer --tool memcheck --error-exitcode 9 $T > /tmp/x/san_memcheck.txt 2>&1
  echo "memcheck rc=$? at $((SECONDS - T0)) s"
fi
cd bench
[ -n "$SBS_A" ] && timeout ${SBS_T:-100} python3 attention_side_by_side.py --lib ../build-fwd-gpu/src/libcamel.so --ops fwd $SBS_A > /tmp/x/sbs_a.txt 2>&1
[ -n "$SBS_B" ] && timeout ${SBS_T:-100} python3 attention_side_by_side.py --lib ../build-fwd-gpu/src/libcamel.so --ops fwd $SBS_B > /tmp/x/sbs_b.txt 2>&1
cd ..
echo "all done at $((SECONDS - T0)) s"
tar czf $OUT/logs.tgz -C /tmp/x .
echo "==== check"; grep -E "FAIL|failures|rc=" /tmp/x/check.txt 2>/dev/null | head -8
echo "==== turns"; sed -E 's/TURNS //; s/TFLOP\/s//' /tmp/x/turns.txt | cut -c1-120
echo "==== test"; grep -E "FAIL|sm90|passed|checks" /tmp/x/test.txt | head -12
[ -n "$SAN" ] && { echo "==== memcheck"; grep -E "ERROR SUMMARY|FAIL|passed" /tmp/x/san_memcheck.txt | head -5; }
echo "==== side by side"; grep -vE "^PyTorch|^$" /tmp/x/sbs_a.txt /tmp/x/sbs_b.txt 2>/dev/null | cut -d: -f2- | head -60
