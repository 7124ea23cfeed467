#!/bin/bash
# Session 11: SEMPAD (each dQ semaphore on a 128-byte line of its own; at D = 256 a query tile's two halves' semaphores
# are adjacent ints today) against the library kernel in turns, both with the plain convert (bwd_harness SET=10, built locally: carry build-att).
#   bash dev/attention_sm90/run_s11f.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (run: carry build-att)
X=/tmp/x; mkdir -p $X
timeout 60 build-att/h11_10 edge > $X/edge10.txt 2>&1; echo "edge rc=$?" >> $X/edge10.txt
CAUSAL=1 REPS=25 timeout 150 build-att/h11_10 perf 2048 4096 8192 16384 > $X/perf_c.txt 2>&1
CAUSAL=0 REPS=25 timeout 80 build-att/h11_10 perf 2048 8192 > $X/perf_f.txt 2>&1
cat $X/perf_c.txt $X/perf_f.txt > $X/perf_all.txt
echo "== edge: $(grep -c 'bitwise equal' $X/edge10.txt) bitwise equal, $(grep -c 'DIFFERS' $X/edge10.txt) DIFFERS; $(tail -1 $X/edge10.txt)"
grep -hE "DIFFERS|failures" $X/perf_all.txt
python3 dev/attention_sm90/bwd_decide.py $X/perf_all.txt sempad --noslower
grep -hE "sempad prof|consumer|dq writer" $X/perf_c.txt | grep -A4 "S=8192.*prof " | cut -c1-330 | head -6
