#!/bin/bash
# Device: the dev harness (fwd_harness.cu) built, variants in turns (TURNS_*), then ncu on one launch of
# the v6 persistent and the v8 pipelined kernel per NCU_CASES entry ("D S causal"). Logs in /tmp/x.
mkdir -p /tmp/x build-fwd
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v \
  dev/attention_sm90/fwd_harness.cu -lcuda -o build-fwd/fatt > /tmp/x/harness_build.txt 2>&1 || exit 1
for D in ${TURNS_D:-64}; do for S in ${TURNS_S:-512 2048 8192}; do for c in 0 1; do
  timeout 20 build-fwd/fatt turns $D $S $c ${TURNS_V} >> /tmp/x/turns.txt 2>&1
done; done; done
echo "$NCU_CASES" | tr ';' '\n' | while read D S c; do [ -z "$D" ] && continue
  for k in persistent pipelined; do
    timeout 60 ncu --clock-control none -k regex:$k -c 1 --section SpeedOfLight --section WarpStateStats \
      --section SchedulerStats build-fwd/fatt turns $D $S $c 0 1 > /tmp/x/ncu_${D}_${S}_${c}_$k.txt 2>&1
  done
done
tar czf $OUT/logs.tgz -C /tmp/x .
sed -E 's/TURNS //; s/TFLOP\/s//' /tmp/x/turns.txt | cut -c1-100
for f in /tmp/x/ncu_*; do echo "== $f"; grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Stall|Warp Cycles Per Issued|Active Warps Per Scheduler|Eligible Warps" $f | sed -E 's/ +/ /g' | head -14; done
