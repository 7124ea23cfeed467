#!/usr/bin/env bash
# Session 29: odd 3000 x 5000 x 1000 (0.90 of cuBLASLt): ncu per launch of both sides (kernel names, grid, DRAM / L2
# bytes), bf16, caches flushed, clocks free. Binary: build-s29x/camel-early (the tree at 4641c83).
#   run(carry=["build-s29x"], command="XDIR=build-s29x bash dev/gemm_sm90/run_s29_ncu_odd.sh")
XDIR=${XDIR:-build-s29x}
source dev/carried.sh
unpack camel-early
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct
timeout 200 ncu --clock-control none --kernel-name-base function -k 'regex:sm90|nvjet|gemm' --section SpeedOfLight \
    --section LaunchStats --metrics $M --csv --page raw /tmp/bin/camel-early bench gemm --dtype bf16 --set odd \
    --reps 3 >$X/ncu_odd.csv 2>$X/ncu_odd.err
stamp "ncu rc $?"
python3 dev/gemm_sm90/ncu_launches.py $X/ncu_odd.csv >$X/ncu_odd.txt 2>&1
head -30 $X/ncu_odd.txt | cut -c1-220
mkdir -p ${OUT:-/tmp/out} && cp $X/ncu_odd.txt ${OUT:-/tmp/out}/
