#!/usr/bin/env bash
# Prepared in session 18 for the next session (not yet run): the probe session 17 named as next for the GPT-2 weight
# gradients (dev/gemm_sm90/README.md, "Session 17 ... refuted"): why 128 CTAs of the stream order run each k-block a
# third slower than today's 96 CTAs on whole 128 x 192 tiles. One build of the tree with s17_dwc.patch (the stream
# order behind CML_SM90_DW_STREAM: 0 today, 1 stream on single CTAs, 2 stream on 2-CTA clusters); then ncu of
# camel bench gemm --dtype bf16 --set gpt2 with the three settings, every launch configuration of ours and of
# cuBLASLt's nvjet kernels once (SpeedOfLight, MemoryWorkloadAnalysis, LaunchStats, Occupancy, WarpStateStats:
# duration, DRAM bytes and throughput, L2 hit rate and throughput, L1 hit rate, SM throughput, stall reasons);
# summary table LAST (dev/gemm_sm90/ncu_details.py). What it decides: DRAM bytes of s1 / s2 well above s0's (~63 MB,
# the operands once) = the stream order's staggered K positions miss L2, and a K-synchronised order is next; equal
# DRAM bytes and a higher L2 throughput = L2 bandwidth; neither = the per-SM issue (stalls).
#   bash dev/gemm_sm90/run_s19_dwprobe.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x W=/tmp/w19d
root=$(pwd)
rm -rf $X $W && mkdir -p $X $W
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
(cd $W && git apply $root/dev/gemm_sm90/s17_dwc.patch) || { stamp "s17_dwc.patch does not apply"; exit 1; }
cmake -S $W -B $W/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    >$X/configure.log 2>&1
timeout 330 cmake --build $W/b -j16 --target camel >$X/build.log 2>&1
stamp "build rc $?"
for v in 0 1 2; do
    [ $(el) -gt 480 ] && { stamp "s$v skipped (time)"; continue; }
    CML_SM90_DW_STREAM=$v timeout 150 ncu --clock-control none --kernel-name-base function \
        -k 'regex:sm90|nvjet' --filter-mode per-launch-config --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
        --section WarpStateStats --csv --page details \
        $W/b/apps/camel/camel bench gemm --dtype bf16 --set gpt2 --reps 5 >$X/ncu_s$v.csv 2>$X/ncu_s$v.err
    stamp "ncu s$v rc $? ($(wc -l <$X/ncu_s$v.csv) lines)"
done
for v in 0 1 2; do
    echo "== CML_SM90_DW_STREAM=$v"
    python3 $root/dev/gemm_sm90/ncu_details.py $X/ncu_s$v.csv
done >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
