#!/usr/bin/env bash
# Session 25: where nbw_kernel's steady row-steps go (LayerNorm backward bf16 4096x4096, 88% of the same-size copy).
# ncu (SourceCounters + WarpStateStats + SpeedOfLight + MemoryWorkloadAnalysis, the 4th launch of the kernel, clocks
# unlocked) of camel-base (70a55c2); the top SASS lines by stall samples last. (build-s25x/)
#   XDIR=build-s25x bash dev/membound/run_s25_ncu_nbw.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s25x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-base
k='nbw_kernelILi2ELb1ELi2ELi256EE'
timeout 250 ncu --clock-control none --kernel-name-base mangled -k "regex:$k" --launch-skip 3 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section LaunchStats -o $X/nbw -f /tmp/bin/camel-base bench membound --mode cold --reps 20 --ops layernorm_bwd \
    >$X/nbw.log 2>&1
stamp "ncu rc $?"
ncu -i $X/nbw.ncu-rep --page source --csv --print-source sass >$X/nbw_src.csv 2>$X/nbw.err
ncu -i $X/nbw.ncu-rep --page details --csv >$X/nbw_det.csv 2>>$X/nbw.err
python3 dev/gemm_sm90/ncu_sass_stalls.py $X/nbw_src.csv >$X/nbw_sass.txt 2>&1
cat $X/stages.txt
grep -E '"(Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Achieved Occupancy|L2 Hit Rate|Mem Busy|Max Bandwidth)"' \
    $X/nbw_det.csv | cut -d, -f5,13-16 | head -20
head -45 $X/nbw_sass.txt
