#!/bin/bash
# Session 8, device call 2 (README.md "Session 8"): FUSEDQ with the converged dQ writer warp
# (call 1's version, lanes 1..31 spinning on the barriers beside lane 0, lost 2-20%). Run in the new
# tree (att90b_cfg: FUSEDQ at D = 128 only); $OLD an unpacked tree of the library before the session.
#  1. both libcamel builds in the background (niced) while bwd_harness.cu builds (D = 128: lib /
#     fused / qdw; SET=1 exit times; SET=2 PROF profiles; D = 64: lib / fused);
#  2. harness edge (bitwise), perf REPS=20 in turns (D = 128 S = 2048 8192 16384, D = 64 S = 2048
#     8192), PROF at S = 2048, exit times; bwd_decide.py (--noslower) on D = 128;
#  3. only on a WIN: the side-by-side bench D = 128 old and new, then (correctness, in parallel)
#     test_gpu_attention_bwd90, racecheck (CML_TEST_ONLY_D=128) and memcheck on it
#     (CML_TEST_SANITIZER=1), bwd_ab.py old vs new.
# The candidate is not in the tree (it lost): `patch -p1 < dev/attention_sm90/s8_fusedq.patch` first,
# then FUSEDQ into att90b_cfg<128>::VAR (attention_bwd_sm90.cu), as in this call.
# Every step has a timeout and is skipped once $DEADLINE seconds have passed; logs under /tmp/x
# (tarred into $OUT/logs.tgz after every step); a summary last.
grep -q CML_ATT90B_V_FUSEDQ src/kernels/cuda/attention/attention_bwd_sm90.cuh ||
  { echo "FUSEDQ missing: patch -p1 < dev/attention_sm90/s8_fusedq.patch first"; exit 2; }
mkdir -p /tmp/x build-att
B=${B:-/tmp/bnew}
OB=${OB:-/tmp/bold}
OLD=${OLD:-/tmp/o}
DEADLINE=${DEADLINE:-300}
. "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,temperature.gpu --format=csv > /tmp/x/gpu.txt 2>&1
grep -n "struct att90b_cfg<128>" -A2 src/kernels/cuda/attention/attention_bwd_sm90.cu | grep VAR > /tmp/x/cfg.txt
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake.txt 2>&1 &&
  nice -n 10 timeout 250 ninja -C $B -j10 camel_shared test_gpu_attention_bwd90 > /tmp/x/build.txt 2>&1
  echo "new lib build rc=$? at ${SECONDS}s" >> /tmp/x/build.txt) &
NEWPID=$!
(cmake -S $OLD -B $OB -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake_old.txt 2>&1 &&
  nice -n 10 timeout 250 ninja -C $OB -j6 camel_shared > /tmp/x/build_old.txt 2>&1
  echo "old lib build rc=$? at ${SECONDS}s" >> /tmp/x/build_old.txt) &
OLDPID=$!
for cfg in "128 0" "128 1" "128 2" "64 0"; do
  set -- $cfg
  timeout 150 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=$1 -DSET=$2 \
    dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/s8_$1_$2 > /tmp/x/nvcc$1_$2.txt 2>&1 &
  eval "NV$1_$2=$!"
done
wait $NV128_0 $NV128_1 $NV128_2 $NV64_0
step edge128 30 build-att/s8_128_0 edge
step edge64 20 build-att/s8_64_0 edge
REPS=20 step perf128 60 build-att/s8_128_0 perf 2048 8192 16384
REPS=20 step perf64 30 build-att/s8_64_0 perf 2048 8192
step prof128 20 build-att/s8_128_2 perf 2048
step exit128 20 build-att/s8_128_1 perf 2048 8192 16384
python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf128.txt fused --noslower > /tmp/x/decide.txt 2>&1
python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf128.txt qdw --noslower > /tmp/x/decide_qdw.txt 2>&1
python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf64.txt fused --noslower > /tmp/x/decide64.txt 2>&1
if grep -q "^DECISION: WIN" /tmp/x/decide.txt; then
  wait $NEWPID $OLDPID
  cd bench
  for lib in new old; do
    L=$([ $lib = new ] && echo $B || echo $OB)/src/libcamel.so
    step bench128_$lib 70 python3 attention_side_by_side.py --lib $L --d 128 --s 2048,4096,8192,16384 --reps 10 \
      --json /tmp/x/bench128_$lib.json
  done
  cd ..
  T=$B/tests/test_gpu_attention_bwd90
  step test_bwd90 100 $T &
  CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=128 step san_racecheck128 100 compute-sanitizer --tool racecheck --error-exitcode 9 $T &
  CML_TEST_SANITIZER=1 step san_memcheck 100 compute-sanitizer --tool memcheck --error-exitcode 9 $T &
  step bwd_ab 100 python3 dev/attention_sm90/bwd_ab.py $OB/src/libcamel.so $B/src/libcamel.so &
  wait $(jobs -p | grep -vE "^($NEWPID|$OLDPID)$")
  cp /tmp/x/bench128_new.json /tmp/x/bench128_old.json $OUT/ 2>/dev/null
fi
tar czf $OUT/logs.tgz -C /tmp/x . 2>/dev/null
cat /tmp/x/gpu.txt /tmp/x/cfg.txt
for f in /tmp/x/nvcc*.txt; do grep -E "error|C7520" $f | cut -c1-100 | head -2; done
for f in edge128 edge64; do echo "== $f"; grep -cE "bitwise equal" /tmp/x/$f.txt; grep -E "DIFFERS|rc=|failures" /tmp/x/$f.txt; done
for f in perf128 perf64; do
  echo "== $f"; grep -E "DIFFERS|rc=|failures" /tmp/x/$f.txt; grep -E "\| bwd" /tmp/x/$f.txt | cut -c1-112
done
echo "== prof128"; grep -vE "check:|\| bwd" /tmp/x/prof128.txt | cut -c1-600
echo "== exit128"; grep -E "exits|DIFFERS|rc=" /tmp/x/exit128.txt | cut -c19-240
cat /tmp/x/decide.txt /tmp/x/decide_qdw.txt /tmp/x/decide64.txt
for f in bench128_new bench128_old; do [ -f /tmp/x/$f.txt ] && { echo "== $f"; grep -E "^fwd|rc=|skipped|differs" /tmp/x/$f.txt; }; done
for f in test_bwd90 bwd_ab san_racecheck128 san_memcheck; do
  [ -f /tmp/x/$f.txt ] && { echo "== $f"; grep -E "FAIL|failed|passed|rc=|skipped|all equal|DIFFER|sm90|ERROR SUMMARY|RACECHECK SUMMARY" /tmp/x/$f.txt | tail -6; }
done
grep -hE "rc=" /tmp/x/build.txt /tmp/x/build_old.txt 2>/dev/null
exit 0
