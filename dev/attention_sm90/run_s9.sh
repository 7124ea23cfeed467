#!/bin/bash
# Session 8, part 3 device call (README.md "Session 8, part 3"): the consumer step's "instruction diet"
# (VAR DIET = DECODE | NOMASK | DESC | STSM, attention_bwd_sm90.cuh; harness variants only: the
# library's kernel and its PTX are unchanged). Run in the repository root (the tree with the patch
# applied). In one call:
#  1. bwd_harness.cu for D = 128 (lib / diet three times each in turns, then decode, nomask, desc,
#     stsm once each), D = 64 (lib / diet three times each) and D = 128 SET=2 (lib prof, diet prof),
#     in parallel;
#  2. harness `edge` (every variant bitwise against lib on awkward shapes: S_q != S_kv both ways,
#     GQA, MQA, lengths 1 .. 4097, a negative scale), D = 128 and 64;
#  3. `perf` REPS=30: D = 128 S = 2048 8192 16384, D = 64 S = 2048 8192 (full and causal; whole
#     backward and main kernel, medians of 30, variants in turns; every run checked bitwise);
#  4. bwd_decide.py diet against lib (--noslower: WIN if on average >= 1% faster, nowhere > 1%
#     slower), and the same for each attribution variant (informative);
#  5. SET=2 phase profile at S = 2048 (lib prof vs diet prof: bar G1 + decode and the P / dS math
#     should fall, plan: ~150 and ~450-500 cycles).
# No library build: the library's PTX is byte-identical to HEAD's (checked locally with nvcc -ptx).
# Every step has a timeout and is skipped once $DEADLINE seconds have passed; logs under /tmp/x
# (tarred into $OUT/logs.tgz after every step); a summary last.
mkdir -p /tmp/x build-att
DEADLINE=${DEADLINE:-300}
. "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,temperature.gpu --format=csv > /tmp/x/gpu.txt 2>&1
NVF="-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v"
timeout 170 nvcc $NVF -DHD=128 dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/s9_128 > /tmp/x/nvcc128.txt 2>&1 &
P1=$!
timeout 170 nvcc $NVF -DHD=64 dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/s9_64 > /tmp/x/nvcc64.txt 2>&1 &
P2=$!
timeout 170 nvcc $NVF -DHD=128 -DSET=2 dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/s9_128_2 > /tmp/x/nvcc128_2.txt 2>&1 &
P3=$!
wait $P1 $P2 $P3
echo "harness built at ${SECONDS}s" > /tmp/x/times.txt
step edge128 40 build-att/s9_128 edge
step edge64 25 build-att/s9_64 edge
REPS=30 step perf128 100 build-att/s9_128 perf 2048 8192 16384
REPS=30 step perf64 45 build-att/s9_64 perf 2048 8192
for v in diet decode nomask desc stsm; do
  python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf128.txt $v --noslower > /tmp/x/decide_$v.txt 2>&1
done
python3 dev/attention_sm90/bwd_decide.py /tmp/x/perf64.txt diet --noslower > /tmp/x/decide64.txt 2>&1
step prof128 25 build-att/s9_128_2 perf 2048
echo "done at ${SECONDS}s" >> /tmp/x/times.txt
tar czf $OUT/logs.tgz -C /tmp/x . 2>/dev/null
cat /tmp/x/gpu.txt /tmp/x/times.txt
for f in /tmp/x/nvcc*.txt; do grep -E "error|spill|C7520" $f | grep -v " 0 bytes spill" | cut -c1-120 | head -3; done
for f in edge128 edge64; do echo "== $f"; grep -cE "bitwise equal" /tmp/x/$f.txt; grep -E "DIFFERS|rc=|failures" /tmp/x/$f.txt; done
for f in perf128 perf64; do
  echo "== $f"; grep -E "DIFFERS|rc=|failures" /tmp/x/$f.txt; grep -E "\| bwd" /tmp/x/$f.txt | cut -c1-112
done
echo "== decide (D = 128: diet, then attribution; D = 64: diet)"
cat /tmp/x/decide_diet.txt
for v in decode nomask desc stsm; do echo "-- $v"; tail -2 /tmp/x/decide_$v.txt; done
cat /tmp/x/decide64.txt
echo "== prof128"; grep -vE "check:|\| bwd" /tmp/x/prof128.txt | cut -c1-600
exit 0
