#!/bin/bash
# Session 8, part 2, device call 2 (README.md "Session 8, part 2"): after run_s8c.sh. In one call:
#  1. libcamel + test_gpu_attention from this tree (background), while bwd_harness.cu builds and runs a
#     second `perf` pass (REPS=30, D = 128 S = 2048 8192 16384, D = 64 S = 2048 8192; plain / pdl in
#     turns; bwd_decide.py pdl against plain);
#  2. in parallel: bwd_ab.py with the sync fix, the new library against a copy of itself run with
#     CML_ATT_BWD_PDL=0 (--old-env: the PDL convert against the plain one, D = 64 / 128 / 256), and
#     test_gpu_attention.
# Every step has a timeout and is skipped once $DEADLINE seconds have passed; logs under /tmp/x.
mkdir -p /tmp/x build-att
B=${B:-/tmp/bnew}
DEADLINE=${DEADLINE:-215}
. "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,temperature.gpu --format=csv > /tmp/x/gpu.txt 2>&1
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCML_WERROR=ON > /tmp/x/cmake.txt 2>&1 &&
  nice -n 10 timeout 160 ninja -C $B -j14 camel_shared test_gpu_attention > /tmp/x/build.txt 2>&1
  echo "new lib build rc=$? at ${SECONDS}s" >> /tmp/x/build.txt) &
NEWPID=$!
for d in 128 64; do
  timeout 100 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -DHD=$d \
    dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/s8d_$d > /tmp/x/nvcc$d.txt 2>&1 &
  eval "NV$d=$!"
done
wait $NV128 $NV64
REPS=30 step perf128 40 build-att/s8d_128 perf 2048 8192 16384
REPS=30 step perf64 30 build-att/s8d_64 perf 2048 8192
python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf128.txt pdl --noslower --base plain > /tmp/x/decide.txt 2>&1
python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf64.txt pdl --noslower --base plain > /tmp/x/decide64.txt 2>&1
wait $NEWPID
echo "library built at ${SECONDS}s" > /tmp/x/times.txt
cp -L $B/src/libcamel.so /tmp/libcamel_plain.so
step bwd_ab 70 python3 dev/attention_sm90/bwd_ab.py --old-env CML_ATT_BWD_PDL=0 /tmp/libcamel_plain.so $B/src/libcamel.so &
step test_att 150 $B/tests/test_gpu_attention &
wait
tar czf $OUT/logs.tgz -C /tmp/x . 2>/dev/null
cat /tmp/x/gpu.txt /tmp/x/times.txt
grep -hE "rc=|error" /tmp/x/build.txt | head -4
for f in perf128 perf64; do echo "== $f"; grep -E "DIFFERS|rc=|failures" /tmp/x/$f.txt; done
cat /tmp/x/decide.txt /tmp/x/decide64.txt
echo "== bwd_ab"; grep -cE "FAIL" /tmp/x/bwd_ab.txt; grep -E "FAIL|bwd_ab" /tmp/x/bwd_ab.txt | tail -8
echo "== test_att"; grep -E "^ok|FAIL|failed|passed|rc=" /tmp/x/test_att.txt | tail -12
exit 0
