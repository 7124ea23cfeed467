#!/bin/bash
# Session 9, helper h9c: the causal longest-first order (plan candidate 2 of "Plan (session 8 study, not
# built): the D = 128 backward at long S"; README "Session 9 (helper h9c)": measured, NOT kept). Apply the
# patch first (`git apply dev/attention_sm90/s9c_lpt.patch`: the library switched to it for causal;
# CML_ATT_BWD_LPT=0 switches back); run in the repository root. One call (145 s on a warm H100):
#  1. libcamel + test_gpu_attention_bwd90 built in $B (niced, background) while bwd_harness.cu builds at
#     HD = 64 / 128 / 256 (SET=0: lib / lpt / lpt2 / lpt4 / libp / lptp three times in turns, lptpo once)
#     and HD = 128 SET=1 (exit times, lib vs lpt vs lpt2);
#  2. harness `edge` (D = 128, 256, 64), then `perf` CAUSAL=1 REPS=20 S = 2k .. 16k at D = 128 and 256
#     (D = 64: 2k, 8k), bwd_decide.py lpt / lpt2 / lpt4 vs lib, lptp / lptpo vs libp (--noslower);
#     SET=1 exit times at D = 128 (idle tail);
#  3. test_gpu_attention_bwd90 (every D, LPT on: the library's default) and compute-sanitizer racecheck /
#     synccheck at D = 128 and 256 (CML_TEST_SANITIZER=1 CML_TEST_ONLY_D), in parallel;
#  4. with the time left: the side-by-side bench (ours vs PyTorch SDPA cuDNN), causal, D = 128 and 256.
# Logs under /tmp/x; a summary last.
grep -q CML_ATT_BWD_LPT src/kernels/cuda/attention/attention_bwd_sm90.cu ||
  { echo "LPT missing: git apply dev/attention_sm90/s9c_lpt.patch first"; exit 2; }
mkdir -p /tmp/x build-att
B=${B:-/tmp/bc}
DEADLINE=${DEADLINE:-380}
. "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,temperature.gpu --format=csv > /tmp/x/gpu.txt 2>&1
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake.txt 2>&1 &&
  nice -n 10 timeout 250 ninja -C $B -j12 camel_shared test_gpu_attention_bwd90 > /tmp/x/build.txt 2>&1
  echo "lib build rc=$? at ${SECONDS}s" >> /tmp/x/build.txt) &
LIBPID=$!
NV="nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v"
PIDS=
for hd in 128 256 64; do
  timeout 200 $NV -DHD=$hd dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/c$hd > /tmp/x/nvcc$hd.txt 2>&1 &
  PIDS="$PIDS $!"
done
timeout 200 $NV -DHD=128 -DSET=1 dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/e128 > /tmp/x/nvcce.txt 2>&1 &
wait $PIDS $!
echo "harness built at ${SECONDS}s" > /tmp/x/times.txt
step edge128 40 build-att/c128 edge
step edge256 40 build-att/c256 edge
step edge64 30 build-att/c64 edge
CAUSAL=1 REPS=20 step perf128 70 build-att/c128 perf 2048 4096 8192 16384
CAUSAL=1 REPS=20 step perf256 70 build-att/c256 perf 2048 4096 8192 16384
CAUSAL=1 REPS=20 step perf64 30 build-att/c64 perf 2048 8192
CAUSAL=1 REPS=1 step exit128 30 build-att/e128 perf 2048 8192 16384
for d in 128 256 64; do
  for v in lpt lpt2 lpt4; do python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf$d.txt $v --noslower > /tmp/x/dec${d}_$v.txt 2>&1; done
  for v in lptp lptpo; do python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf$d.txt $v --noslower --base libp > /tmp/x/dec${d}_$v.txt 2>&1; done
done
echo "harness done at ${SECONDS}s" >> /tmp/x/times.txt
wait $LIBPID
T=$B/tests/test_gpu_attention_bwd90
step test_bwd90 120 $T &
for d in 128 256; do
  CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=$d step san_race$d 120 compute-sanitizer --tool racecheck --error-exitcode 9 $T &
  CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=$d step san_sync$d 120 compute-sanitizer --tool synccheck --error-exitcode 9 $T &
done
wait
echo "tests done at ${SECONDS}s" >> /tmp/x/times.txt
(cd bench && STEP_MIN=40 step bench 110 python3 attention_side_by_side.py --lib $B/src/libcamel.so --d 128,256 \
  --s 2048,4096,8192,16384 --causal yes --reps 10 --json /tmp/x/bench_causal.json)
cp /tmp/x/bench_causal.json $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz -C /tmp/x . 2>/dev/null
cat /tmp/x/gpu.txt /tmp/x/times.txt; grep -hE "rc=|error" /tmp/x/build.txt | head -4
grep -hE "error|C7520|bytes spill" /tmp/x/nvcc*.txt | grep -v " 0 bytes spill" | cut -c1-120 | head -4
for d in 128 256 64; do
  f=/tmp/x/edge$d.txt
  echo "== edge$d: $(grep -c 'check: bitwise equal' $f) bitwise equal, $(grep -c 'lpt bitwise equal' $f) lpt bitwise equal," \
    "$(grep -c 'lpt order reference' $f) lpt refs, $(grep -c DIFFERS $f) DIFFERS; $(tail -2 $f | tr '\n' ' ')"
  grep "lpt order reference" $f | sed 's/ *check: lpt order reference//' | cut -c1-110
done
for d in 128 256 64; do
  echo "== perf$d: $(grep -c 'bitwise equal' /tmp/x/perf$d.txt) checks equal, $(grep -c DIFFERS /tmp/x/perf$d.txt) DIFFERS"
  grep -E "rc=|failures" /tmp/x/perf$d.txt
  for v in lpt lpt2 lpt4 lptp lptpo; do # per S: bwd ratio (main ratio); then the decision
    echo "-- $v: $(grep -oE "^S=[0-9]+|ratio bwd [0-9.]+ main [0-9.]+" /tmp/x/dec${d}_$v.txt | sed -E 's/ratio bwd ([0-9.]+) main ([0-9.]+)/\1 (\2)/' | paste -sd' ')"
    grep -hoE "DECISION.*" /tmp/x/dec${d}_$v.txt
  done
done
echo "== exit128"; grep -E "exits" /tmp/x/exit128.txt | sed -E 's/exits \(us from the first CTA start; //' | cut -c1-150
for f in test_bwd90 san_race128 san_sync128 san_race256 san_sync256; do
  echo "== $f"; grep -E "rc=|FAIL|passed|determinism:|ERROR SUMMARY|RACECHECK SUMMARY" /tmp/x/$f.txt | head -5
done
echo "== bench"; grep -vE "^\s*$" /tmp/x/bench.txt | tail -14
exit 0
