#!/bin/bash
# Session 11: DQSPLIT (D = 256: each dQ half buffer in two 16 KB pieces, the first freed once read) against the
# library kernel in turns (bwd_harness HD=256 SET=8, built locally: carry build-att), 3 rounds.
#   bash dev/attention_sm90/run_s11g.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (run: carry build-att)
X=/tmp/x; mkdir -p $X
timeout 60 build-att/h11_8 edge > $X/edge8.txt 2>&1; echo "edge rc=$?" >> $X/edge8.txt
for r in 1 2 3; do
  CAUSAL=1 REPS=25 timeout 100 build-att/h11_8 perf 2048 4096 8192 16384 > $X/perf_c$r.txt 2>&1
  CAUSAL=0 REPS=25 timeout 60 build-att/h11_8 perf 2048 8192 > $X/perf_f$r.txt 2>&1
done
cat $X/perf_c?.txt $X/perf_f?.txt > $X/perf_all.txt
echo "== edge: $(grep -c 'bitwise equal' $X/edge8.txt) bitwise equal, $(grep -c 'DIFFERS' $X/edge8.txt) DIFFERS; $(tail -1 $X/edge8.txt)"
grep -hE "DIFFERS|failures" $X/perf_all.txt | sort | uniq -c
for r in 1 2 3; do echo "-- round $r"; cat $X/perf_c$r.txt $X/perf_f$r.txt > $X/r$r.txt; python3 dev/attention_sm90/bwd_decide.py $X/r$r.txt dqsplit --noslower | grep -E "ratio|DECISION"; done
echo "-- all rounds (best of 6 turns)"; python3 dev/attention_sm90/bwd_decide.py $X/perf_all.txt dqsplit --noslower
grep -hE "dqsplit prof|consumer|dq writer" $X/perf_c1.txt | grep -A4 "S=8192.*prof " | cut -c1-330 | head -5
