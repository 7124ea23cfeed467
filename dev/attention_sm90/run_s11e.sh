#!/bin/bash
# Session 11: WSWAP / WPROD0 (warp 3's writer contention moved to consumer 0, which has slack; today consumer 1 waits ~1600 cycles a step at
# its dQ buffer) against the library kernel in turns, D = 256 (bwd_harness SET=9, built locally: carry build-att).
#   bash dev/attention_sm90/run_s11e.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (run: carry build-att)
X=/tmp/x; mkdir -p $X
timeout 60 build-att/h11_9 edge > $X/edge9.txt 2>&1; echo "edge rc=$?" >> $X/edge9.txt
CAUSAL=1 REPS=25 timeout 150 build-att/h11_9 perf 2048 4096 8192 16384 > $X/perf_c.txt 2>&1
CAUSAL=0 REPS=25 timeout 80 build-att/h11_9 perf 2048 8192 > $X/perf_f.txt 2>&1
cat $X/perf_c.txt $X/perf_f.txt > $X/perf_all.txt
echo "== edge: $(grep -c 'bitwise equal' $X/edge9.txt) bitwise equal, $(grep -c 'DIFFERS' $X/edge9.txt) DIFFERS; $(tail -1 $X/edge9.txt)"
grep -hE "DIFFERS|failures" $X/perf_all.txt
for c in wswap wprod0; do python3 dev/attention_sm90/bwd_decide.py $X/perf_all.txt $c --noslower; done
grep -hE "prof |consumer|dq writer" $X/perf_c.txt | grep -A3 "S=8192.*prof " | cut -c1-330 | head -10
