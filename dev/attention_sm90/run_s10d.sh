#!/bin/bash
# Session 10, helper h10d (README "Plan (session 10 study, helper h10d)"): the D = 256 causal backward's
# dQ-order cost as it is NOW (h9b's unord ran before D = 256's two writers per buffer) and where the writers'
# time goes, before anyone builds the 2-CTA pair kernel of the plan. No library change; harness only.
# Run in the repository root (the lead's tree with this commit's dev/ files), ~100-150 s:
#   bash dev/attention_sm90/run_s10d.sh; tar czf $OUT/logs.tgz -C /tmp/x .        (run: timeout_s 300)
#  1. bwd_harness.cu -DHD=256 built twice at once: SET=3 (lib / unord / lib (2) / unord (2): unord adds
#     with no key-block order, NOT deterministic, timing only; session 10 also timed VAR SPIN here, the writers
#     polling without sleep: 1.11-1.21x slower, removed in session 11) and SET=2 (lib / lib prof:
#     the dQ writers' phases);
#  2. SET=3 `edge` (lib runs bitwise equal to each other; unord differs by design), then `perf` REPS=25
#     CAUSAL=1 S = 4k / 8k / 16k (B S = 16k, H = 8) and CAUSAL=0 S = 8k; bwd_decide.py unord vs lib;
#  3. SET=2 `perf` CAUSAL=1 S = 4k / 8k / 16k: per partial full wait / order wait / add issue + read / add
#     done + release (cycles), per writer.
# Reading (README): if unord / lib (main, causal 8k) >= 0.98, the order is no longer the gap and the pair
# kernel is not worth building (its idle step and lockstep cost ~1-2%); if <= 0.96 and the writers' order
# wait is >= 1/3 of a step, the pair plan stands. DRY=1: only the summary, on logs already in $X.
X=${X:-/tmp/x}
mkdir -p $X
# The harness needs VAR SPIN (merged into the library source in session 10; SASS of the library unchanged).
mkdir -p build-att
DEADLINE=${DEADLINE:-280}
STEP_MIN=${STEP_MIN:-15}
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
  for s in 2 3; do
    [ -n "${SKIP_BUILD:-}" ] && [ -x build-att/h10d_$s ] && continue  # built by the caller (dev/s11_first.sh)
    (timeout 150 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=256 \
      -DSET=$s dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/h10d_$s > $X/nvcc$s.txt 2>&1
     echo "SET=$s built rc=$? at ${SECONDS}s" >> $X/nvcc$s.txt) &
  done
  wait
  step edge 40 build-att/h10d_3 edge
  CAUSAL=1 REPS=25 step perf_c 100 build-att/h10d_3 perf 4096 8192 16384
  CAUSAL=0 REPS=25 step perf_f 40 build-att/h10d_3 perf 8192
  CAUSAL=1 REPS=10 step prof 60 build-att/h10d_2 perf 4096 8192 16384
fi
cat $X/perf_c.txt $X/perf_f.txt > $X/perf_all.txt 2>/dev/null
python3 dev/attention_sm90/bwd_decide.py $X/perf_all.txt unord --noslower > $X/decide_unord.txt 2>&1
# summary (last: the reply shows the tail)
cat $X/gpu.txt $X/tree.txt 2>/dev/null
for s in 2 3; do
  tail -1 $X/nvcc$s.txt
  grep -E "error|C75[0-9][0-9]" $X/nvcc$s.txt | cut -c1-140 | sort | uniq -c | head -4
  grep -E "bytes spill" $X/nvcc$s.txt | grep -v " 0 bytes spill stores, 0 bytes spill loads" | head -2
  [ $s = 2 ] && echo "  (SET=2's PROF build spills 32 bytes: known since session 9; SET=3 must show none)"
done
echo "== edge: $(grep -c 'bitwise equal' $X/edge.txt) bitwise equal, $(grep -c DIFFERS $X/edge.txt) DIFFERS," \
  "$(grep -c 'differs (unord' $X/edge.txt) unord differ (by design)"
echo "== perf (lib / unord, medians of 25, best of 2)"; grep -hE "DIFFERS|rc=|failures" $X/perf_c.txt $X/perf_f.txt
echo "-- unord / lib (a WIN here means: the order still costs that much; unord is no candidate)"
cat $X/decide_unord.txt
echo "== writers' profile (lib prof, causal; cycles per partial)"
grep -hE "rc=|^D=.*lib prof|dq writer" $X/prof.txt | cut -c1-200 | head -24
exit 0
