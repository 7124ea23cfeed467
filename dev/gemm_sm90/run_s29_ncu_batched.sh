#!/usr/bin/env bash
# Session 29: why 64 x 1024^3 strided batched runs at 0.93-0.94 (bf16) / 0.90 (tf32) of the same problems as one
# 65536 x 1024 x 1024 GEMM with the same tile plan: ncu per launch of ours (DRAM / L2 bytes, L2 hit rate, duration),
# caches flushed before each as in the bench, clocks not locked. Binary: build-s29x/camel-bench.
#   run(carry=["build-s29x"], command="XDIR=build-s29x bash dev/gemm_sm90/run_s29_ncu_batched.sh")
XDIR=${XDIR:-build-s29x}
source dev/carried.sh
unpack camel-bench
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct
for dt in bf16 tf32; do
    timeout 200 ncu --clock-control none --kernel-name-base function -k 'regex:sm90' --section SpeedOfLight \
        --section LaunchStats --section WarpStateStats --metrics $M --csv --page raw /tmp/bin/camel-bench bench gemm \
        --dtype $dt --set batched --reps 3 >$X/ncu_$dt.csv 2>$X/ncu_$dt.err
    stamp "ncu $dt rc $?"
    python3 dev/gemm_sm90/ncu_launches.py $X/ncu_$dt.csv >$X/ncu_$dt.txt 2>&1
    cat $X/ncu_$dt.txt | tail -30
done
cp -r $X/. ${OUT:-/tmp/out}/
