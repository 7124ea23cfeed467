#!/usr/bin/env bash
# Session 26: each bf16 GPT-2 GEMM of ours (camel-est: this session's tree) and of cuBLASLt in isolation under ncu
# (one launch at a time, caches flushed, clocks unlocked): duration, grid, cluster, DRAM / L2 bytes, clock -- to set
# the kernels' own times beside camel bench gemm's event times (which add launch and flush costs).
#   XDIR=build-s26x bash dev/gemm_sm90/run_s26_ncu.sh   (carry build-s26x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-est
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
timeout 400 ncu --clock-control none --kernel-name-base function -k 'regex:sm90|nvjet' --section SpeedOfLight \
    --section LaunchStats --metrics $M --csv --page raw /tmp/bin/camel-est bench gemm --dtype bf16 --set gpt2 --reps 1 \
    >$X/ncu_gpt2.csv 2>$X/ncu_gpt2.err
stamp "ncu rc $? ($(wc -l <$X/ncu_gpt2.csv) lines)"
python3 dev/gemm_sm90/ncu_launches.py $X/ncu_gpt2.csv >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
