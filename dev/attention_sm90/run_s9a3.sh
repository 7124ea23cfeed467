#!/bin/bash
# Session 9, helper h9a: the confirming call for s9a_d256_diet.patch (README "Session 9 (helper h9a)";
# NOT run: the helper's two calls were spent). Apply the patch first (`git apply
# dev/attention_sm90/s9a_d256_diet.patch`); run in the repository root. In one call:
#  1. libcamel + test_gpu_attention_bwd90 built in $B (niced, background) while bwd_harness.cu -DHD=256
#     builds (lib = the library before the patch, new = the patch's kernel and head interleave, three
#     times each in turns; libpol, diet: each change alone);
#  2. harness `edge`, then `perf` REPS=30 S = 2k .. 16k, full and causal; bwd_decide.py new vs lib
#     (--noslower: WIN if on average >= 1% faster, nowhere > 1% slower), libpol and diet vs lib;
#  3. the side-by-side bench of the patched library (ours vs PyTorch SDPA cuDNN / FA2), D = 256;
#  4. test_gpu_attention_bwd90 and compute-sanitizer memcheck / racecheck / synccheck
#     (CML_TEST_ONLY_D=256 CML_TEST_SANITIZER=1), in parallel.
# About 170 s (helper h9a's call 1 ran the same steps in 160 s). Logs under /tmp/x3; a summary last.
grep -q CML_ATT90B_V_DIET256 src/kernels/cuda/attention/attention_bwd_sm90.cuh ||
  { echo "DIET256 missing: git apply dev/attention_sm90/s9a_d256_diet.patch first"; exit 2; }
mkdir -p /tmp/x3 build-att
B=${B:-/tmp/bnew3}
DEADLINE=${DEADLINE:-370}
STEP_MIN=${STEP_MIN:-15}
. "$(dirname "$0")/steps.sh"
step() { # steps.sh's step, logging under /tmp/x3
  local name=$1 max=$2 t
  shift 2
  t=$(left)
  [ $t -gt $max ] && t=$max
  if [ $t -lt ${STEP_MIN:-10} ]; then echo "skipped (deadline)" > /tmp/x3/$name.txt; return; fi
  timeout $t "$@" > /tmp/x3/$name.txt 2>&1
  echo "$name rc=$? (${t}s limit, at ${SECONDS}s)" >> /tmp/x3/$name.txt
  tar czf $OUT/logs3.tgz -C /tmp/x3 . 2>/dev/null
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,temperature.gpu --format=csv > /tmp/x3/gpu.txt 2>&1
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x3/cmake.txt 2>&1 &&
  nice -n 10 timeout 250 ninja -C $B -j14 camel_shared test_gpu_attention_bwd90 > /tmp/x3/build.txt 2>&1
  echo "lib build rc=$? at ${SECONDS}s" >> /tmp/x3/build.txt) &
LIBPID=$!
timeout 150 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=256 \
  dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/s9a3 > /tmp/x3/nvcc.txt 2>&1
step edge 45 build-att/s9a3 edge
REPS=30 step perf 120 build-att/s9a3 perf 2048 4096 8192 16384
python3 dev/attention_sm90/bwd_decide.py /tmp/x3/perf.txt new --noslower > /tmp/x3/decide_new.txt 2>&1
for v in libpol diet; do
  python3 dev/attention_sm90/bwd_decide.py /tmp/x3/perf.txt $v --noslower > /tmp/x3/decide_$v.txt 2>&1
done
wait $LIBPID
(cd bench && step bench256 100 python3 attention_side_by_side.py --lib $B/src/libcamel.so --d 256 \
  --s 2048,4096,8192,16384 --reps 10 --json /tmp/x3/bench256.json)
T=$B/tests/test_gpu_attention_bwd90
step test_bwd90 150 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_synccheck 150 compute-sanitizer --tool synccheck --error-exitcode 9 $T
wait
cp /tmp/x3/bench256.json $OUT/ 2>/dev/null
tar czf $OUT/logs3.tgz -C /tmp/x3 . 2>/dev/null
cat /tmp/x3/gpu.txt; grep -hE "rc=|error" /tmp/x3/build.txt | head -4
grep -E "error|spill|C7520" /tmp/x3/nvcc.txt | grep -v " 0 bytes spill" | cut -c1-120 | head -3
echo "== edge: $(grep -c 'bitwise equal' /tmp/x3/edge.txt) bitwise equal, $(grep -c DIFFERS /tmp/x3/edge.txt) DIFFERS"
echo "== perf"; grep -E "DIFFERS|rc=|failures" /tmp/x3/perf.txt; grep -E "\| bwd" /tmp/x3/perf.txt | cut -c1-104
for v in new libpol diet; do echo "-- $v / lib"; cat /tmp/x3/decide_$v.txt; done
echo "== bench256"; grep -vE "^\s*$" /tmp/x3/bench256.txt | tail -20
for f in test_bwd90 san_memcheck san_racecheck san_synccheck; do
  echo "== $f"; grep -E "rc=|FAIL|passed|determinism:|ERROR SUMMARY|RACECHECK SUMMARY|sm90" /tmp/x3/$f.txt | head -6
done
exit 0
