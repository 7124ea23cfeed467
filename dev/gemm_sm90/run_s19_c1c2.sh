#!/usr/bin/env bash
# Session 19: why our 128 x 192 5-stage kernel at cluster 2 loses to cluster 1 on 8192 x 768 x 768 NT (attn_proj fwd)
# while cuBLASLt runs its 192 x 128 tile in 1 x 2 clusters: ncu WarpStateStats of the three (raw page), then
# SourceCounters of ours at cluster 1 (top SASS lines by warp-stall samples). Runs `camel tune gemm --dtype bf16
# --set gpt2` under ncu (the tuner forces every configuration; each launch configuration's third launch is profiled,
# the first such launches are attn_proj fwd's). Needs a build in build-space (run_s19_space.sh makes it).
#   bash dev/gemm_sm90/run_s19_c1c2.sh; tar czf $OUT/logs.tgz -C /tmp/x .
set -u
X=/tmp/x B=build-space
mkdir -p $X
[ -x $B/apps/camel/camel ] || { echo "no $B: run dev/gemm_sm90/run_s19_space.sh first"; exit 1; }
# mangled names: a demangled-name regex with the template list matched nothing
timeout 300 ncu --clock-control none --kernel-name-base mangled \
    -k 'regex:gemm_sm90_kernelILi192ELi5ELi0ELi0ELi0ELi[12]ELi0EE|192x128_64x5_1x2_h_bz_coopB_TNT' \
    --filter-mode per-launch-config --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section WarpStateStats --metrics dram__bytes_read.sum \
    --csv --page raw $B/apps/camel/camel tune gemm --dtype bf16 --set gpt2 >$X/ncu.csv 2>$X/ncu.err
echo "ncu rc $?"
# SourceCounters of ours at cluster 1 and 2 (session 19 ran cluster 1 only: the SASS lines of cluster 2's extra
# barrier / membar stalls are the next question)
for c in 1 2; do
    timeout 200 ncu --clock-control none --kernel-name-base mangled -k "regex:gemm_sm90_kernelILi192ELi5ELi0ELi0ELi0ELi${c}ELi0EE" \
        --filter-mode per-launch-config --launch-skip 2 --launch-count 1 --section SourceCounters --section WarpStateStats \
        -o $X/src_c$c -f $B/apps/camel/camel tune gemm --dtype bf16 --set gpt2 >$X/src_c$c.log 2>&1
    echo "ncu source c$c rc $?"
    ncu -i $X/src_c$c.ncu-rep --page source --csv --print-source sass >$X/src_c$c.csv 2>$X/src_c$c.err
done
python3 dev/gemm_sm90/ncu_stalls_raw.py $X/ncu.csv
for c in 1 2; do echo "== cluster $c"; python3 dev/gemm_sm90/ncu_sass_stalls.py $X/src_c$c.csv; done
