#!/bin/bash
# Session 8 device call (README.md "Session 8", plan candidate 5 FUSEDQ, candidate 6's QDWARP,
# candidate 3's exit times). Run in the new tree; $OLD is an unpacked tree of the library before the
# session (git archive of the lead's HEAD). In one call:
#  1. libcamel + test_gpu_attention_bwd90 + test_gpu_attention built from this tree in $B, libcamel
#     from $OLD in $OB (both niced, in the background), while bwd_harness.cu builds (D = 128: lib /
#     fused / fqdw; D = 128 SET=1: exit times; D = 64: lib / fused);
#  2. harness: `edge` (bitwise on awkward shapes), `perf` REPS=20 (D = 128 S = ${HS:-2048 8192 16384},
#     D = 64 S = 2048 8192; variants in turns), exit times (D = 128, S = 2048 8192 16384);
#  3. the side-by-side bench, old and new libcamel one after the other: D = 128 S = 2k..16k (fwd and
#     fwd_bwd), then D = 256 and D = 64 at S = 2048, 8192 (fwd_bwd);
#  4. in parallel (correctness only): test_gpu_attention_bwd90, test_gpu_attention,
#     compute-sanitizer racecheck (CML_TEST_ONLY_D=128, then 256) and memcheck on the bwd90 test
#     (CML_TEST_SANITIZER=1), bwd_ab.py (old vs new dQ, dK, dV bitwise, D = 64 / 128 / 256).
# The candidate is not in the tree (it lost): `patch -p1 < dev/attention_sm90/s8_fusedq.patch` first,
# then FUSEDQ into att90b_cfg<64/128/256>::VAR (attention_bwd_sm90.cu). This call ran the FIRST writer
# version (lanes 1..31 waiting on dq_full / dq_back themselves, diverged from lane 0; dq_empty with 32
# arrivals; README "Session 8") and a harness list lib / fused / fqdw (= fused + QDWARP); the patch
# holds the second version (converged warp) and the list lib / fused / qdw.
# Every step has a timeout and is skipped once $DEADLINE seconds have passed; logs under /tmp/x
# (tarred into $OUT/logs.tgz after every step); a summary last.
grep -q CML_ATT90B_V_FUSEDQ src/kernels/cuda/attention/attention_bwd_sm90.cuh ||
  { echo "FUSEDQ missing: patch -p1 < dev/attention_sm90/s8_fusedq.patch first"; exit 2; }
mkdir -p /tmp/x build-att
B=${B:-/tmp/bnew}
OB=${OB:-/tmp/bold}
OLD=${OLD:-/tmp/o}
DEADLINE=${DEADLINE:-380}
. "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,temperature.gpu --format=csv > /tmp/x/gpu.txt 2>&1
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake.txt 2>&1 &&
  nice -n 10 timeout 250 ninja -C $B -j10 camel_shared test_gpu_attention_bwd90 test_gpu_attention > /tmp/x/build.txt 2>&1
  echo "new lib build rc=$? at ${SECONDS}s" >> /tmp/x/build.txt) &
NEWPID=$!
(cmake -S $OLD -B $OB -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake_old.txt 2>&1 &&
  nice -n 10 timeout 250 ninja -C $OB -j6 camel_shared > /tmp/x/build_old.txt 2>&1
  echo "old lib build rc=$? at ${SECONDS}s" >> /tmp/x/build_old.txt) &
OLDPID=$!
for cfg in "128 0" "128 1" "64 0"; do
  set -- $cfg
  timeout 150 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=$1 -DSET=$2 \
    dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/s8_$1_$2 > /tmp/x/nvcc$1_$2.txt 2>&1 &
  eval "NV$1_$2=$!"
done
wait $NV128_0 $NV128_1 $NV64_0
step edge128 40 build-att/s8_128_0 edge
step edge64 30 build-att/s8_64_0 edge
REPS=20 step perf128 90 build-att/s8_128_0 perf ${HS:-2048 8192 16384}
REPS=20 step perf64 40 build-att/s8_64_0 perf 2048 8192
step exit128 30 build-att/s8_128_1 perf 2048 8192 16384
wait $NEWPID $OLDPID
cd bench
for lib in new old; do
  L=$([ $lib = new ] && echo $B || echo $OB)/src/libcamel.so
  step bench128_$lib 70 python3 attention_side_by_side.py --lib $L --d 128 --s 2048,4096,8192,16384 --reps 10 \
    --json /tmp/x/bench128_$lib.json
done
for lib in new old; do
  L=$([ $lib = new ] && echo $B || echo $OB)/src/libcamel.so
  step bench_256_64_$lib 45 python3 attention_side_by_side.py --lib $L --d 256,64 --s 2048,8192 --ops fwd_bwd \
    --reps 10 --json /tmp/x/bench256_64_$lib.json
done
cd ..
T=$B/tests/test_gpu_attention_bwd90
step test_bwd90 150 $T &
step test_att 150 $B/tests/test_gpu_attention &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=128 step san_racecheck128 150 compute-sanitizer --tool racecheck --error-exitcode 9 $T &
CML_TEST_SANITIZER=1 step san_memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 $T &
step bwd_ab 100 python3 dev/attention_sm90/bwd_ab.py $OB/src/libcamel.so $B/src/libcamel.so
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_racecheck256 100 compute-sanitizer --tool racecheck --error-exitcode 9 $T
wait
cp /tmp/x/bench128_new.json /tmp/x/bench128_old.json $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz -C /tmp/x . 2>/dev/null
cat /tmp/x/gpu.txt
grep -hE "rc=|error" /tmp/x/build.txt /tmp/x/build_old.txt | head -6
grep -h "warning" /tmp/x/build.txt | grep -v C7519 | head -3
for f in /tmp/x/nvcc*.txt; do grep -E "error|spill" $f | grep -v " 0 bytes spill" | cut -c1-100 | head -2; done
for f in edge128 edge64; do echo "== $f"; grep -cE "bitwise equal" /tmp/x/$f.txt; grep -E "DIFFERS|rc=|failures" /tmp/x/$f.txt; done
for f in perf128 perf64; do
  echo "== $f"; grep -E "DIFFERS|rc=|failures" /tmp/x/$f.txt; grep -E "\| bwd" /tmp/x/$f.txt | cut -c1-112
done
echo "== exit128"; grep -E "exits|DIFFERS|rc=" /tmp/x/exit128.txt | cut -c1-230
for f in bench128_new bench128_old bench_256_64_new bench_256_64_old; do
  echo "== $f"; grep -E "^fwd|rc=|skipped|differs" /tmp/x/$f.txt
done
for f in test_bwd90 test_att bwd_ab; do echo "== $f"; grep -E "FAIL|failed|passed|rc=|skipped|all equal|DIFFER|sm90" /tmp/x/$f.txt | tail -8; done
for f in san_racecheck128 san_racecheck256 san_memcheck; do
  echo "== $f"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|passed|failed|skipped" /tmp/x/$f.txt | head -5
done
