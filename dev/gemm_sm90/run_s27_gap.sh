#!/usr/bin/env bash
# Session 27: the part of a GEMM launch outside its CTAs. ncu (caches flushed, clocks unlocked) of ours and
# cuBLASLt's kernels: duration against the busiest SM's active time (s27/ncu_gap.py), for bf16 1024^3 and the bf16
# GPT-2 set; then s27/launch_gap_probe.cu (a frame kernel by shared-memory size: event time against its CTAs' span).
#   XDIR=build-s27x bash dev/gemm_sm90/run_s27_gap.sh   (carry build-s27x: camel-force, lgp)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-force
M=gpu__time_duration.sum,sm__cycles_active.max,sm__cycles_active.avg,gpc__cycles_elapsed.avg.per_second
for s in "square --sizes 1024" "gpt2"; do
    n=${s%% *}
    timeout 200 ncu --clock-control none --kernel-name-base function -k 'regex:sm90|nvjet' --metrics $M --csv \
        --page raw /tmp/bin/camel-force bench gemm --dtype bf16 --set $s --reps 2 >$X/ncu_$n.csv 2>$X/ncu_$n.err
    stamp "ncu $n rc $?"
    python3 dev/gemm_sm90/s27/ncu_gap.py $X/ncu_$n.csv >$X/gap_$n.txt 2>&1
done
cp $XDIR/lgp /tmp/bin/lgp && timeout 120 /tmp/bin/lgp 40 >$X/probe.txt 2>&1
stamp "probe rc $?"
cat $X/stages.txt; for n in square gpt2; do sed -n '/^medians/,$p' $X/gap_$n.txt; done; cat $X/probe.txt
mkdir -p ${OUT:-/tmp/out} && cp $X/*.txt ${OUT:-/tmp/out}/
