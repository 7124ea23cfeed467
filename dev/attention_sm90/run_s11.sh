#!/bin/bash
# Session 11, one device call: the D = 256 backward's dQ writers with their turn waited before the partial
# (VAR PREPOLL) and with longer poll sleeps (SLEEP2 / SLEEP8, PREPOLL + SLEEP4), against the library kernel
# in turns (bwd_harness SET=4, built on this machine: carry build-att), then the writer profile of PREPOLL
# (SET=5; its PROF build spills in the 24-register producer warpgroup: phases only roughly), then -- with
# what time is left -- the library's sm_90a build (-Werror) and every GPU test (the tree's untested HEAD).
#   bash dev/attention_sm90/run_s11.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (run: carry build-att, timeout_s 600)
X=/tmp/x; mkdir -p $X; T0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $X/gpu.txt 2>&1
timeout 90 build-att/h11_4 edge > $X/edge.txt 2>&1; echo "edge rc=$?" >> $X/edge.txt
CAUSAL=1 REPS=25 timeout 150 build-att/h11_4 perf 4096 8192 16384 > $X/perf_c.txt 2>&1
CAUSAL=0 REPS=25 timeout 60 build-att/h11_4 perf 8192 > $X/perf_f.txt 2>&1
CAUSAL=1 REPS=10 timeout 40 build-att/h11_5 perf 8192 > $X/prof.txt 2>&1
cat $X/perf_c.txt $X/perf_f.txt > $X/perf_all.txt
for c in prepoll sleep64 sleep256 pp128; do
  echo "-- $c / lib"; python3 dev/attention_sm90/bwd_decide.py $X/perf_all.txt $c --noslower
done > $X/decide.txt 2>&1
echo "harness done at $((SECONDS - T0)) s" > $X/summary.txt
B=build-s11; cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S . -B $B $cfg > /dev/null && timeout 240 cmake --build $B -j16) > $X/build.log 2>&1
echo "build rc=$? at $((SECONDS - T0)) s; C75xx: $(grep -oE '\(C75[0-9]+\)' $X/build.log | sort | uniq -c | tr '\n' ' ')" >> $X/summary.txt
left=$((560 - (SECONDS - T0)))
if [ $left -gt 60 ]; then
  timeout $left ctest --test-dir $B -L gpu -j4 --timeout $((left - 5)) > $X/ctest.log 2>&1
  echo "ctest -L gpu rc=$? at $((SECONDS - T0)) s" >> $X/summary.txt
  grep -E "tests passed|Failed|\*\*\*|Not Run" $X/ctest.log | head -20 >> $X/summary.txt
fi
cat $X/gpu.txt
echo "== edge: $(grep -c 'bitwise equal' $X/edge.txt) bitwise equal, $(grep -c DIFFERS $X/edge.txt) DIFFERS; $(tail -1 $X/edge.txt)"
grep -hE "DIFFERS|failures" $X/perf_c.txt $X/perf_f.txt
cat $X/decide.txt
echo "== writers' profile (prepoll prof vs lib's from session 10's run_s10d: order wait 1300-1600, full wait 7100-7500)"
grep -hE "rc=|prof|dq writer" $X/prof.txt | cut -c1-200 | head -12
cat $X/summary.txt
