#!/bin/bash
# Session 7, candidate 2 (README "Session 7", per-consumer dQ halves; helper h7b): ONE device call.
# The candidate is not in the tree (it lost): apply s7_dqhalves.patch first (patch -p1 < ...).
#  1. bwd_harness.cu at D = 128 and 64 (-Xptxas=-v logged) while libcamel + test_gpu_attention_bwd90
#     build in $B (niced) with att90b_cfg<128>::VAR = EARLYREL | DQHALVES patched into THIS COPY of
#     the tree (the candidate as the library would run it);
#  2. harness "perf" REPS=20 at D = 128 over S = ${HS:-2048 8192 16384}, full and causal (lib, halves,
#     lib, halves, lib, halves in turns, each bitwise against lib), D = 64 over ${HS64:-2048 8192},
#     then the PROF profiles at S = 2048 full;
#  3. the decision (bwd_decide.py): halves wins if its best-of-3 bwd time is >= 2% below lib's on at
#     least 4 of the 6 D = 128 points and bitwise equal everywhere;
#  4. only then: test_gpu_attention_bwd90, compute-sanitizer racecheck / synccheck on it
#     (CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=128), the side-by-side bench at D = 128 (S = 2048, 8192).
# Every step has a timeout and is skipped once $DEADLINE seconds have passed; the logs are re-tarred
# into $OUT/logs.tgz after every step (so that a cut call still returns them); a summary last.
grep -q CML_ATT90B_V_DQHALVES src/kernels/cuda/attention/attention_bwd_sm90.cuh ||
  { echo "DQHALVES missing: patch -p1 < dev/attention_sm90/s7_dqhalves.patch first"; exit 2; }
mkdir -p /tmp/x build-att
B=${B:-build-h7b-gpu}
DEADLINE=${DEADLINE:-300}
. "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > /tmp/x/gpu.txt 2>&1
F=src/kernels/cuda/attention/attention_bwd_sm90.cu
sed -i 's/HALVES = 1, VAR = CML_ATT90B_V_EARLYREL };/HALVES = 1, VAR = CML_ATT90B_V_EARLYREL | CML_ATT90B_V_DQHALVES };/' $F
grep -n "DQHALVES };" $F > /tmp/x/patched.txt
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake.txt 2>&1 &&
  nice -n 19 timeout 250 ninja -C $B -j14 test_gpu_attention_bwd90 camel_shared > /tmp/x/build.txt 2>&1
  echo "lib build rc=$? at ${SECONDS}s" >> /tmp/x/build.txt) &
LIBPID=$!
for d in 64 128; do
  timeout 150 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=$d \
    dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/h7b$d > /tmp/x/nvcc$d.txt 2>&1 &
  eval "NV$d=$!"
done
wait $NV64 $NV128
REPS=20 step perf128 110 build-att/h7b128 perf ${HS:-2048 8192 16384}
REPS=20 step perf64 40 build-att/h7b64 perf ${HS64:-2048 8192}
step prof128 20 build-att/h7b128 prof 2048 0
step prof64 20 build-att/h7b64 prof 2048 0
python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf128.txt > /tmp/x/decide.txt 2>&1
if grep -q "^DECISION: WIN" /tmp/x/decide.txt; then
  wait $LIBPID
  T=$B/tests/test_gpu_attention_bwd90
  step test_bwd90 80 $T
  export CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=128
  step san_racecheck 70 compute-sanitizer --tool racecheck --error-exitcode 9 $T
  step san_synccheck 50 compute-sanitizer --tool synccheck --error-exitcode 9 $T
  unset CML_TEST_SANITIZER CML_TEST_ONLY_D
  cd bench
  step bench128 80 python3 attention_side_by_side.py --lib ../$B/src/libcamel.so --d 128 --s 2048,8192 --reps 10 \
    --json /tmp/x/bench128.json
  cd ..
  cp /tmp/x/bench128.json $OUT/ 2>/dev/null
else
  kill $LIBPID 2>/dev/null
fi
tar czf $OUT/logs.tgz -C /tmp/x . 2>/dev/null
cat /tmp/x/gpu.txt /tmp/x/patched.txt
for d in 64 128; do
  grep -E "error|C7520" /tmp/x/nvcc$d.txt | cut -c1-120 | head -4
  grep -A2 "Compiling entry.*att90b_kernel" /tmp/x/nvcc$d.txt | grep -E "Compiling|spill" | sed -e "s/.*kernelILi0E//" -e "s/EEv14.*//" | paste - - | sed "s/^/D=$d /"
done
grep -E "rc=|error" /tmp/x/build.txt 2>/dev/null | head -5
for f in perf128 perf64; do
  echo "== $f"; grep -E "DIFFERS|rc=|failures" /tmp/x/$f.txt; grep -E "\| bwd" /tmp/x/$f.txt | cut -c1-110
done
for f in prof128 prof64; do grep -vE "check:|\| bwd" /tmp/x/$f.txt | cut -c1-420; done
cat /tmp/x/decide.txt
for f in test_bwd90 san_racecheck san_synccheck bench128; do
  [ -f /tmp/x/$f.txt ] || continue
  echo "== $f"; grep -E "FAIL|failed|passed|rc=|skipped|ERROR SUMMARY|RACECHECK SUMMARY|^fwd|ours|cuDNN" /tmp/x/$f.txt | head -12
done
