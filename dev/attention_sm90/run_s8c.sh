#!/bin/bash
# Session 8, part 2 device call (README.md "Session 8, part 2"): the dQ convert kernel as a
# programmatic dependent launch of the main backward kernel (WAIT variant: query tiles converted as
# their semaphores complete, on the SMs the main kernel's tail frees). Run in the new tree; $OLD is an
# unpacked tree of the library before it (git archive of the lead's HEAD). In one call:
#  1. libcamel + test_gpu_attention_bwd90 from this tree in $B, libcamel from $OLD in $OB (both niced,
#     in the background), while bwd_harness.cu builds (D = 128 and D = 64: lib / plain / pdl in turns);
#  2. harness `edge` (pdl and plain bitwise against lib on awkward shapes), `perf` REPS=30 (D = 128
#     S = 2048 8192 16384, D = 64 S = 2048 8192; whole backward, plain and pdl three times each in
#     turns), bwd_decide.py pdl against plain (--noslower);
#  3. correctness, in parallel: test_gpu_attention_bwd90 with PDL (the default) and with
#     CML_ATT_BWD_PDL=0, compute-sanitizer memcheck (CML_TEST_SANITIZER=1) and racecheck
#     (CML_TEST_ONLY_D=128, 256), bwd_ab.py (old vs new library: dQ, dK, dV bitwise, D = 64/128/256);
#  4. the side-by-side bench D = 128 S = 2k..16k, new then old library (then the new one with
#     CML_ATT_BWD_PDL=0 if time is left).
# test_gpu_attention (~110 s) is not run: the change is in the backward only, which the bwd90 test
# and bwd_ab.py cover. Every step has a timeout and is skipped once $DEADLINE seconds have passed;
# logs under /tmp/x (tarred into $OUT/logs.tgz after every step); a summary last.
mkdir -p /tmp/x build-att
B=${B:-/tmp/bnew}
OB=${OB:-/tmp/bold}
OLD=${OLD:-/tmp/o}
DEADLINE=${DEADLINE:-285}
. "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,temperature.gpu --format=csv > /tmp/x/gpu.txt 2>&1
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake.txt 2>&1 &&
  nice -n 10 timeout 200 ninja -C $B -j10 camel_shared test_gpu_attention_bwd90 > /tmp/x/build.txt 2>&1
  echo "new lib build rc=$? at ${SECONDS}s" >> /tmp/x/build.txt) &
NEWPID=$!
(cmake -S $OLD -B $OB -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake_old.txt 2>&1 &&
  nice -n 10 timeout 200 ninja -C $OB -j6 camel_shared > /tmp/x/build_old.txt 2>&1
  echo "old lib build rc=$? at ${SECONDS}s" >> /tmp/x/build_old.txt) &
OLDPID=$!
for d in 128 64; do
  timeout 150 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=$d \
    dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/s8c_$d > /tmp/x/nvcc$d.txt 2>&1 &
  eval "NV$d=$!"
done
wait $NV128 $NV64
echo "harness built at ${SECONDS}s" > /tmp/x/times.txt
step edge128 30 build-att/s8c_128 edge
step edge64 20 build-att/s8c_64 edge
REPS=30 step perf128 70 build-att/s8c_128 perf 2048 8192 16384
REPS=30 step perf64 40 build-att/s8c_64 perf 2048 8192
python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf128.txt pdl --noslower --base plain > /tmp/x/decide.txt 2>&1
python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf64.txt pdl --noslower --base plain > /tmp/x/decide64.txt 2>&1
wait $NEWPID $OLDPID
echo "libraries built at ${SECONDS}s" >> /tmp/x/times.txt
T=$B/tests/test_gpu_attention_bwd90
step test_bwd90 100 $T &
CML_ATT_BWD_PDL=0 step test_bwd90_plain 100 $T &
CML_TEST_SANITIZER=1 step san_memcheck 100 compute-sanitizer --tool memcheck --error-exitcode 9 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=128 step san_racecheck128 100 compute-sanitizer --tool racecheck --error-exitcode 9 $T &
CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 step san_racecheck256 100 compute-sanitizer --tool racecheck --error-exitcode 9 $T &
step bwd_ab 100 python3 dev/attention_sm90/bwd_ab.py $OB/src/libcamel.so $B/src/libcamel.so &
wait $(jobs -p)
echo "correctness done at ${SECONDS}s" >> /tmp/x/times.txt
cd bench
step bench128_new 55 python3 attention_side_by_side.py --lib $B/src/libcamel.so --d 128 --s 2048,4096,8192,16384 \
  --reps 10 --json /tmp/x/bench128_new.json
step bench128_old 55 python3 attention_side_by_side.py --lib $OB/src/libcamel.so --d 128 --s 2048,4096,8192,16384 \
  --reps 10 --json /tmp/x/bench128_old.json
[ $(left) -gt 50 ] && CML_ATT_BWD_PDL=0 step bench128_newplain 55 python3 attention_side_by_side.py \
  --lib $B/src/libcamel.so --d 128 --s 2048,4096,8192,16384 --reps 10 --json /tmp/x/bench128_newplain.json
cd ..
cp /tmp/x/bench128_*.json $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz -C /tmp/x . 2>/dev/null
cat /tmp/x/gpu.txt /tmp/x/times.txt
grep -hE "rc=|error" /tmp/x/build.txt /tmp/x/build_old.txt | head -6
grep -h "warning" /tmp/x/build.txt | grep -v C7519 | head -3
for f in /tmp/x/nvcc*.txt; do grep -E "error|spill" $f | grep -v " 0 bytes spill" | cut -c1-100 | head -2; done
for f in edge128 edge64; do echo "== $f"; grep -cE "bitwise equal" /tmp/x/$f.txt; grep -E "DIFFERS|rc=|failures" /tmp/x/$f.txt; done
for f in perf128 perf64; do
  echo "== $f"; grep -E "DIFFERS|rc=|failures" /tmp/x/$f.txt; grep -E "\| bwd" /tmp/x/$f.txt | cut -c1-112
done
cat /tmp/x/decide.txt /tmp/x/decide64.txt
for f in test_bwd90 test_bwd90_plain bwd_ab san_memcheck san_racecheck128 san_racecheck256; do
  echo "== $f"; grep -E "FAIL|failed|passed|rc=|skipped|all equal|DIFFER|sm90|ERROR SUMMARY|RACECHECK SUMMARY|determinism" /tmp/x/$f.txt | tail -6
done
for f in bench128_new bench128_old bench128_newplain; do
  [ -f /tmp/x/$f.txt ] && { echo "== $f"; grep -E "^fwd|rc=|skipped|differs" /tmp/x/$f.txt; }
done
exit 0
