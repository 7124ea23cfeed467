#!/bin/bash
# RAN (call 2) on commit c1fd092 plus a SET=3 list that is now in s9a_d256_diet.patch with the names
# swapped ("lib" -> "new", "old" -> "lib"); not runnable on the final tree as it stands.
# Session 9, helper h9a, call 2 (README "Session 9 (helper h9a)"): why the D = 256 diet measured 8-17%
# slower without the mask at S = 8k / 16k (call 1, run_s9a.sh) -- bwd_harness.cu -DHD=256 -DSET=3: lib
# (DIET) and old (VAR 0) under head interleaves 4 (the library's), 8, 2, 1, 16, both without the dQ
# order (UNORDERED), DESC | STSM alone; full only (CAUSAL=0), S = 2k .. 16k, REPS=30, in turns.
# Then `edge` of the same binary (bitwise against lib; unord differs by design). Summary last.
mkdir -p /tmp/x2 build-att
timeout 150 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -DHD=256 -DSET=3 \
  dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/s9a2 > /tmp/x2/nvcc.txt 2>&1
echo "built at ${SECONDS}s"
CAUSAL=0 REPS=30 timeout 200 build-att/s9a2 perf 2048 4096 8192 16384 > /tmp/x2/perf.txt 2>&1; echo "perf rc=$? at ${SECONDS}s"
for c in old oldhg8 oldhg2 oldhg1 oldhg16 oldunord ds; do
  python3 dev/attention_sm90/bwd_decide.py /tmp/x2/perf.txt $c --noslower > /tmp/x2/decide_$c.txt 2>&1
done
for c in libhg8 libhg2 libhg1 libhg16; do
  python3 dev/attention_sm90/bwd_decide.py /tmp/x2/perf.txt $c --base old --noslower > /tmp/x2/decide_$c.txt 2>&1
done
python3 dev/attention_sm90/bwd_decide.py /tmp/x2/perf.txt libunord --base oldunord --noslower > /tmp/x2/decide_libunord.txt 2>&1
timeout 60 build-att/s9a2 edge > /tmp/x2/edge.txt 2>&1; echo "edge rc=$? at ${SECONDS}s"
tar czf $OUT/logs2.tgz -C /tmp/x2 .
grep -E "error" /tmp/x2/nvcc.txt | head -3
echo "== edge: $(grep -c 'bitwise equal' /tmp/x2/edge.txt) bitwise equal, $(grep -c 'DIFFERS' /tmp/x2/edge.txt) DIFFERS"
grep -E "\| bwd" /tmp/x2/perf.txt | cut -c1-104
for f in /tmp/x2/decide_*.txt; do echo "-- $(basename $f)"; grep -E "S=(8192|16384)|DECISION" $f; done
