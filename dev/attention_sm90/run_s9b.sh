#!/bin/bash
# Session 9, helper h9b: the D = 256 backward's cheap knobs in one call (README "Session 9 (helper h9b)").
# Run in the repository root. In one call:
#  1. libcamel + test_gpu_attention_bwd90 built in $B (niced, background) while bwd_harness.cu -DHD=256
#     (SET 0: lib = the library's kernel and order, c2 / c4 / c16 = causal with 2 / 4 / 16 kv heads
#     interleaved, three times each in turns; f1 / f4 full with 1 / 4 heads; unord; EXITT exit times);
#  2. harness `edge`, then `perf` REPS=25 S = 2k .. 16k, full and causal; bwd_decide.py each vs lib;
#  3. test_gpu_attention_bwd90 (D = 256 cases) and compute-sanitizer racecheck / synccheck with the
#     causal interleave on (CML_ATT_BWD_CH256=16), in parallel;
#  4. if time is left: the side-by-side bench, D = 256, with the best causal interleave of step 2.
# Logs under /tmp/h9b; a summary last. Run once (H100, 126 s): the call's tree also had a library switch,
# CML_ATT_BWD_CH256=n (kv heads interleaved in the D = 256 causal tile order, read once in
# attention_bwd_sm90.cu), so that steps 3-4 ran the library with the interleave; every interleave lost, and
# the switch was removed after the call (steps 3-4 now run the library's head-major order).
L=/tmp/h9b
mkdir -p $L build-att
B=${B:-/tmp/bh9b}
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
  dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/h9b > $L/nvcc.txt 2>&1
echo "harness built at ${SECONDS}s" >> $L/nvcc.txt
step edge 40 build-att/h9b edge
REPS=25 step perf 90 build-att/h9b perf 2048 4096 8192 16384
for v in c2 c4 c16 f1 f4 unord; do
  python3 dev/attention_sm90/bwd_decide.py $L/perf.txt $v --noslower > $L/decide_$v.txt 2>&1
done
wait $LIBPID
T=$B/tests/test_gpu_attention_bwd90
export CML_ATT_BWD_CH256=16
CML_TEST_ONLY_D=256 step test_bwd90 80 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_racecheck 80 compute-sanitizer --tool racecheck --error-exitcode 9 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_synccheck 80 compute-sanitizer --tool synccheck --error-exitcode 9 $T
wait
# the causal interleave of the lowest mean ratio (1 if none is below 0.99)
BEST=$(for v in c2 c4 c16; do grep -o "mean [0-9.]*" $L/decide_$v.txt | sed "s/mean /$v /"; done |
  sort -k2 -n | awk 'NR == 1 { if ($2 < 0.99) print substr($1, 2); else print 1 }')
echo "bench with CML_ATT_BWD_CH256=${BEST:-1}" > $L/bench_knob.txt
(cd bench && CML_ATT_BWD_CH256=${BEST:-1} step bench256 90 python3 attention_side_by_side.py --lib $B/src/libcamel.so \
  --d 256 --s 2048,4096,8192,16384 --ops fwd,fwd_bwd --causal both --reps 10 --json $L/bench256.json)
tar czf $OUT/logs.tgz -C $L . 2>/dev/null
cat $L/gpu.txt; grep -hE "rc=|error" $L/build.txt | head -4; tail -1 $L/nvcc.txt
grep -E "error|spill|C7520" $L/nvcc.txt | grep -v " 0 bytes spill" | cut -c1-120 | head -3
echo "== edge: $(grep -c 'bitwise equal' $L/edge.txt) bitwise equal, $(grep -c DIFFERS $L/edge.txt) DIFFERS, $(grep -c 'differs (unord' $L/edge.txt) unord differ"
echo "== perf"; grep -E "DIFFERS|rc=|failures" $L/perf.txt; grep -E " lib  .*\| bwd" $L/perf.txt | cut -c1-60
grep -E "exits" $L/perf.txt | sed -E 's/ \(us from the first CTA start; ([0-9]+) CTAs, starts within [0-9.]+ us\)//' | cut -c1-140
for v in c2 c4 c16 f1 f4 unord; do echo "-- $v / lib"; cat $L/decide_$v.txt; done
for f in test_bwd90 san_racecheck san_synccheck; do
  echo "== $f"; grep -E "rc=|FAIL|passed|determinism:|ERROR SUMMARY|RACECHECK SUMMARY|sm90" $L/$f.txt | head -5
done
cat $L/bench_knob.txt; grep -vE "^\s*$" $L/bench256.txt | tail -22
exit 0
