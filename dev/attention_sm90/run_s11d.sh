#!/bin/bash
# Session 11: WPAIR (a dQ buffer's two writers share a warp; today both second writers share warp 3 and poll at
# the same time) against the library kernel in turns, D = 256 (bwd_harness SET=8, built locally: carry build-att).
#   bash dev/attention_sm90/run_s11d.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (run: carry build-att)
X=/tmp/x; mkdir -p $X
timeout 60 build-att/h11_8 edge > $X/edge8.txt 2>&1; echo "edge rc=$?" >> $X/edge8.txt
CAUSAL=1 REPS=25 timeout 150 build-att/h11_8 perf 2048 4096 8192 16384 > $X/perf_c.txt 2>&1
CAUSAL=0 REPS=25 timeout 80 build-att/h11_8 perf 2048 8192 > $X/perf_f.txt 2>&1
cat $X/perf_c.txt $X/perf_f.txt > $X/perf_all.txt
echo "== edge: $(grep -c 'bitwise equal' $X/edge8.txt) bitwise equal, $(grep -c 'DIFFERS' $X/edge8.txt) DIFFERS; $(tail -1 $X/edge8.txt)"
grep -hE "DIFFERS|failures" $X/perf_all.txt
python3 dev/attention_sm90/bwd_decide.py $X/perf_all.txt wpair --noslower
grep -hE "wpair prof|consumer|dq writer" $X/perf_c.txt | grep -A3 "S=8192" | cut -c1-330 | head -5
