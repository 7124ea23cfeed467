#!/bin/bash
# RAN (call 1) on commit c1fd092, whose harness list named the diet "lib" and the kernel before it
# "old"; the final tree has neither list (the diet is in s9a_d256_diet.patch, whose list names them
# "new" and "lib": run_s9a3.sh is this call for the patch).
# Session 9, helper h9a (README "Session 9 (helper h9a)"): the D = 256 consumers' instruction diet
# (VAR DIET in attention_bwd_sm90_d256.cuh; the library's att90b_cfg<256>::VAR). Run in the
# repository root of the tree with the change. In one call:
#  1. libcamel + test_gpu_attention_bwd90 built in $B (niced, in the background) while bwd_harness.cu
#     builds at D = 256 (variants lib = DIET and old = VAR 0, the kernel before, three times each in
#     turns, then decode / nomask / desc / stsm alone);
#  2. harness `edge` (every variant bitwise against lib on awkward shapes: S_q != S_kv both ways, GQA,
#     MQA, lengths 1 .. 4097, a negative scale), then `perf` REPS=30 at S = 2048 4096 8192 16384, full
#     and causal (B S = 16k tokens, H = 8; whole backward and main kernel, medians of 30, variants in
#     turns; every run checked bitwise); bwd_decide.py old against lib and lib against old;
#  3. the side-by-side bench (ours vs PyTorch SDPA cuDNN / FA2), D = 256, S = 2k..16k, fwd + fwd_bwd;
#  4. in parallel (correctness only): test_gpu_attention_bwd90 (41 cases, determinism 1000 D = 128 +
#     300 D = 256 runs), compute-sanitizer memcheck, racecheck and synccheck on it (CML_TEST_ONLY_D=256,
#     CML_TEST_SANITIZER=1).
# Every step has a timeout and is skipped once $DEADLINE seconds have passed; logs under /tmp/x
# (tarred into $OUT/logs.tgz after every step); a summary last.
mkdir -p /tmp/x build-att
B=${B:-/tmp/bnew}
DEADLINE=${DEADLINE:-370}
STEP_MIN=${STEP_MIN:-15}
. "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,temperature.gpu --format=csv > /tmp/x/gpu.txt 2>&1
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake.txt 2>&1 &&
  nice -n 10 timeout 250 ninja -C $B -j14 camel_shared test_gpu_attention_bwd90 > /tmp/x/build.txt 2>&1
  echo "lib build rc=$? at ${SECONDS}s" >> /tmp/x/build.txt) &
LIBPID=$!
timeout 150 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=256 \
  dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/s9a_256 > /tmp/x/nvcc256.txt 2>&1
echo "harness built at ${SECONDS}s" > /tmp/x/times.txt
step edge256 45 build-att/s9a_256 edge
REPS=30 step perf256 110 build-att/s9a_256 perf 2048 4096 8192 16384
python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf256.txt old --noslower > /tmp/x/decide_old.txt 2>&1
python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf256.txt lib --base old --noslower > /tmp/x/decide_lib.txt 2>&1
for v in decode nomask desc stsm; do
  python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf256.txt $v --base old --noslower > /tmp/x/decide_$v.txt 2>&1
done
echo "perf done at ${SECONDS}s" >> /tmp/x/times.txt
wait $LIBPID
echo "lib waited at ${SECONDS}s" >> /tmp/x/times.txt
(cd bench && step bench256 100 python3 attention_side_by_side.py --lib $B/src/libcamel.so --d 256 \
  --s 2048,4096,8192,16384 --reps 10 --json /tmp/x/bench256.json)
T=$B/tests/test_gpu_attention_bwd90
step test_bwd90 150 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_synccheck 150 compute-sanitizer --tool synccheck --error-exitcode 9 $T
wait
echo "done at ${SECONDS}s" >> /tmp/x/times.txt
cp /tmp/x/bench256.json $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz -C /tmp/x . 2>/dev/null
cat /tmp/x/gpu.txt /tmp/x/times.txt
grep -hE "rc=|error" /tmp/x/build.txt | head -4
grep -h "warning" /tmp/x/build.txt | grep -v C7519 | head -3
grep -E "error|spill|C7520" /tmp/x/nvcc256.txt | grep -v " 0 bytes spill" | cut -c1-120 | head -3
echo "== edge256"; grep -cE "bitwise equal" /tmp/x/edge256.txt; grep -E "DIFFERS|rc=|failures" /tmp/x/edge256.txt
echo "== perf256"; grep -E "DIFFERS|rc=|failures" /tmp/x/perf256.txt; grep -cE "bitwise equal" /tmp/x/perf256.txt
grep -E "\| bwd" /tmp/x/perf256.txt | grep -E " (lib|old)" | cut -c1-112
echo "== decide (old / lib, then lib / old, then each piece / old)"
cat /tmp/x/decide_old.txt /tmp/x/decide_lib.txt
for v in decode nomask desc stsm; do echo "-- $v"; tail -1 /tmp/x/decide_$v.txt; done
echo "== bench256"; grep -vE "^\s*$" /tmp/x/bench256.txt | tail -22
for f in test_bwd90 san_memcheck san_racecheck san_synccheck; do
  echo "== $f"; grep -E "rc=|FAIL|passed|determinism:|ERROR SUMMARY|RACECHECK SUMMARY|sm90" /tmp/x/$f.txt | head -6
done
exit 0
