#!/bin/bash
# Session 12 (built by helper h11d in session 11; README "Session 11 (helper h11d, 2026-11-23): pair-K D = 256
# backward -- built, not yet run"): the dev pair-K kernel (attention_bwd_sm90_d256p.cuh, 2-CTA clusters, one
# ordered dQ add per key-block pair) against the library's D = 256 backward, in turns, both with the library's
# PDL convert. Since session 12 the pair-K kernel IS the library's D = 256 backward: "lib" below is the one-CTA
# kernel it replaced (attention_bwd_sm90_d256.cuh). Run in the repository root, ~200-290 s:
#   bash dev/attention_sm90/run_s12a.sh; tar czf $OUT/logs.tgz -C /tmp/x .        (run: timeout_s 330)
#  1. bwd_harness.cu -DHD=256 -DSET=9 (lib / pair / lib (2) / pair (2)) built here; ptxas lines kept;
#  2. `edge`: lib runs bitwise equal; pair: dK / dV bitwise equal to lib, dQ bitwise equal between the pair runs
#     and within 1e-2 (relative, norm-wise) of lib (its bits differ by design: the pair's sum in the wgmma);
#  3. `perf` REPS=25 CAUSAL=1 at S = 2k / 4k / 8k / 16k, CAUSAL=0 at 8k (B S = 16k, H = 8, bf16);
#     bwd_decide.py pair vs lib (--noslower);
#  4. if time is left: compute-sanitizer racecheck and synccheck of `edge` on its first 4 shapes.
# Reading (README): refuted if pair / lib (whole backward) > 0.99 at causal 8k or > 1.01 anywhere at S >= 4k.
# DRY=1: only the summary, on logs already in $X.
X=${X:-/tmp/x}
mkdir -p $X build-att
DEADLINE=${DEADLINE:-290}
STEP_MIN=${STEP_MIN:-15}
BIN=build-att/h12a_9
left() { echo $((DEADLINE - SECONDS)); }
step() { # step NAME MAX CMD...: CMD under min(MAX, time left), logged to $X/NAME.txt
  local name=$1 max=$2 t
  shift 2
  t=$(left)
  [ $t -gt $max ] && t=$max
  if [ $t -lt $STEP_MIN ]; then echo "skipped (deadline)" > $X/$name.txt; return; fi
  timeout $t "$@" > $X/$name.txt 2>&1
  echo "$name rc=$? (${t}s limit, at ${SECONDS}s)" >> $X/$name.txt
}
if [ -z "$DRY" ]; then
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,temperature.gpu --format=csv > $X/gpu.txt 2>&1
  timeout 200 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v \
    -Xptxas=--warn-on-spills -DHD=256 -DSET=9 dev/attention_sm90/bwd_harness.cu -lcuda -o $BIN > $X/nvcc9.txt 2>&1
  echo "SET=9 built rc=$? at ${SECONDS}s" >> $X/nvcc9.txt
  step edge 40 $BIN edge
  CAUSAL=1 REPS=25 step perf_c 110 $BIN perf 2048 4096 8192 16384
  CAUSAL=0 REPS=25 step perf_f 35 $BIN perf 8192
  EDGE_MAX=4 step racecheck 50 compute-sanitizer --tool racecheck --racecheck-report hazard $BIN edge
  EDGE_MAX=4 step synccheck 40 compute-sanitizer --tool synccheck $BIN edge
fi
cat $X/perf_c.txt $X/perf_f.txt > $X/perf_all.txt 2>/dev/null
python3 dev/attention_sm90/bwd_decide.py $X/perf_all.txt pair --noslower > $X/decide_pair.txt 2>&1
# summary (last: the reply shows the tail)
cat $X/gpu.txt 2>/dev/null
echo "== build"; tail -1 $X/nvcc9.txt
grep -E "error" $X/nvcc9.txt | head -5 | cut -c1-200
grep -E "C75[0-9][0-9]" $X/nvcc9.txt | sed -E 's/.*\((C75[0-9]+)\).*function .(_Z[0-9]+[a-z0-9_]+).*/\1 \2/' | sort | uniq -c
grep -E "bytes spill" $X/nvcc9.txt | grep -v " 0 bytes spill stores, 0 bytes spill loads" | head -3
awk '/Compiling entry function/ {match($0, /_Z[0-9]+[A-Za-z0-9_]+/); f = substr($0, RSTART, 40)}
     /Used [0-9]+ registers/ && f ~ /att90b256|att90b_dq/ {print "  " f ": " $0; f = ""}' $X/nvcc9.txt | \
  sed -E 's/ptxas info +: //' | sort -u | head -8
grep -h "pair-K kernel:" $X/edge.txt $X/perf_c.txt 2>/dev/null | head -1
echo "== edge: $(grep -c 'bitwise equal (' $X/edge.txt) lib bitwise equal, $(grep -c 'pair ok' $X/edge.txt) pair ok," \
  "$(grep -c 'DIFFERS' $X/edge.txt) DIFFERS; $(tail -2 $X/edge.txt | tr '\n' ' ')"
grep -h "DIFFERS" $X/edge.txt | head -4 | cut -c1-220
grep -h "dQ rel.diff" $X/edge.txt $X/perf_c.txt $X/perf_f.txt 2>/dev/null | sed -E 's/.*rel.diff ([0-9.e+-]+).*/\1/' | \
  sort -g | tail -1 | sed 's/^/  largest pair dQ rel.diff to lib: /'
echo "== perf (medians of 25; pair / lib of the whole backward, best of 2 turns)"
grep -hE "DIFFERS|rc=|failures" $X/perf_c.txt $X/perf_f.txt
grep -hE "\| bwd" $X/perf_c.txt $X/perf_f.txt | sed -E 's/ +\| prep.*//' | cut -c1-90
cat $X/decide_pair.txt
echo "== sanitizers (edge, first 4 shapes)"
for t in racecheck synccheck; do
  echo "$t: $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|rc=|skipped' $X/$t.txt 2>/dev/null | tr '\n' ' ')"
done
exit 0
