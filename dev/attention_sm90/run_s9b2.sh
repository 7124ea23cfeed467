#!/bin/bash
# Session 9, helper h9b: the confirming call for s9b_dq2w.patch (README "Session 9 (helper h9b)"; NOT run:
# the helper's one call was spent on the knobs). Apply the patch first (`git apply
# dev/attention_sm90/s9b_dq2w.patch`); run in the repository root. In one call:
#  1. libcamel + test_gpu_attention_bwd90 built in $B (niced, background; the patched library: D = 256 with
#     DQ2W) while bwd_harness.cu -DHD=256 builds (lib = the library before the patch, dq2w = the patch's
#     kernel, three times each in turns; dq2wp = the other placement of the second writers, twice; the dQ
#     writers' phase profile (prof) and CTA exit times (exit) of both);
#  2. harness `edge` (bits equal to lib on awkward shapes, CTAs without tiles: the end passed between the
#     writers), then `perf` REPS=25 S = 2k .. 16k, full and causal; bwd_decide.py dq2w / dq2wp vs lib
#     (--noslower: WIN if on average >= 1% faster, nowhere > 1% slower);
#  3. test_gpu_attention_bwd90 (D = 256 cases: float64 reference, 300 repeats bitwise) and compute-sanitizer
#     racecheck / synccheck (CML_TEST_ONLY_D=256 CML_TEST_SANITIZER=1), in parallel;
#  4. the side-by-side bench of the patched library, D = 256.
# About 130 s (run_s9b.sh, the same steps, ran 126 s). Logs under /tmp/h9b2; a summary last.
grep -q CML_ATT90B_V_DQ2W src/kernels/cuda/attention/attention_bwd_sm90.cuh ||
  { echo "DQ2W missing: git apply dev/attention_sm90/s9b_dq2w.patch first"; exit 2; }
L=/tmp/h9b2
mkdir -p $L build-att
B=${B:-/tmp/bh9b2}
DEADLINE=${DEADLINE:-240}
STEP_MIN=${STEP_MIN:-15}
left() { echo $((DEADLINE - SECONDS)); }
step() { # step NAME MAX CMD...: CMD under min(MAX, time left), logged to $L/NAME.txt
  local name=$1 max=$2 t
  shift 2
  t=$(left)
  [ $t -gt $max ] && t=$max
  if [ $t -lt $STEP_MIN ]; then echo "skipped (deadline)" > $L/$name.txt; return; fi
  timeout $t "$@" > $L/$name.txt 2>&1
  echo "$name rc=$? (${t}s limit, at ${SECONDS}s)" >> $L/$name.txt
  tar czf $OUT/logs.tgz -C $L . 2>/dev/null
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,temperature.gpu --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > $L/cmake.txt 2>&1 &&
  nice -n 10 timeout 200 ninja -C $B -j14 camel_shared test_gpu_attention_bwd90 > $L/build.txt 2>&1
  echo "lib build rc=$? at ${SECONDS}s" >> $L/build.txt) &
LIBPID=$!
timeout 120 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=256 \
  dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/h9b2 > $L/nvcc.txt 2>&1
echo "harness built at ${SECONDS}s" >> $L/nvcc.txt
step edge 40 build-att/h9b2 edge
REPS=25 step perf 90 build-att/h9b2 perf 2048 4096 8192 16384
for v in dq2w dq2wp; do
  python3 dev/attention_sm90/bwd_decide.py $L/perf.txt $v --noslower > $L/decide_$v.txt 2>&1
done
wait $LIBPID
T=$B/tests/test_gpu_attention_bwd90
CML_TEST_ONLY_D=256 step test_bwd90 80 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_racecheck 80 compute-sanitizer --tool racecheck --error-exitcode 9 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_synccheck 80 compute-sanitizer --tool synccheck --error-exitcode 9 $T
wait
(cd bench && step bench256 90 python3 attention_side_by_side.py --lib $B/src/libcamel.so --d 256 \
  --s 2048,4096,8192,16384 --ops fwd,fwd_bwd --causal both --reps 10 --json $L/bench256.json)
tar czf $OUT/logs.tgz -C $L . 2>/dev/null
cat $L/gpu.txt; grep -hE "rc=|error" $L/build.txt | head -4; tail -1 $L/nvcc.txt
grep -E "error|spill|C7520" $L/nvcc.txt | grep -v " 0 bytes spill" | cut -c1-120 | head -3
echo "== edge: $(grep -c 'bitwise equal' $L/edge.txt) bitwise equal, $(grep -c DIFFERS $L/edge.txt) DIFFERS"; tail -2 $L/edge.txt
echo "== perf"; grep -E "DIFFERS|rc=|failures" $L/perf.txt
grep -E "profile|dq writer" $L/perf.txt | cut -c1-150
grep -E "exits" $L/perf.txt | sed -E 's/ \(us from the first CTA start; ([0-9]+) CTAs, starts within [0-9.]+ us\)//' |
  sed -E 's/first exit.*idle tail \(1 - mean exit \/ span\)/tail/' | cut -c1-100
for v in dq2w dq2wp; do echo "-- $v / lib"; cat $L/decide_$v.txt; done
for f in test_bwd90 san_racecheck san_synccheck; do
  echo "== $f"; grep -E "rc=|FAIL|passed|determinism:|ERROR SUMMARY|RACECHECK SUMMARY|sm90" $L/$f.txt | head -5
done
grep -vE "^\s*$" $L/bench256.txt | tail -22
exit 0
