#!/bin/bash
# Session 11: the D = 256 backward consumers' phases (VAR PROF, consumer laps added in session 11) with the
# library's ordered dQ adds and without order (UNORDERED: timing only), causal 4k / 8k / 16k and full 8k, to see
# where the order's 4-8% goes. bwd_harness HD=256 SET=7 built locally (carry build-att).
#   bash dev/attention_sm90/run_s11c.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (run: carry build-att)
X=/tmp/x; mkdir -p $X
timeout 60 build-att/h11_7 edge > $X/edge7.txt 2>&1; echo "edge rc=$?" >> $X/edge7.txt
CAUSAL=1 REPS=10 timeout 80 build-att/h11_7 perf 4096 8192 16384 > $X/prof_c.txt 2>&1
CAUSAL=0 REPS=10 timeout 40 build-att/h11_7 perf 8192 > $X/prof_f.txt 2>&1
echo "== edge: $(grep -c 'bitwise equal' $X/edge7.txt) bitwise equal, $(grep -c 'DIFFERS' $X/edge7.txt) DIFFERS; $(tail -1 $X/edge7.txt)"
grep -hE "lib  |DIFFERS|profile|consumer|dq writer|rc=" $X/prof_c.txt $X/prof_f.txt | cut -c1-400
