#!/usr/bin/env bash
# Session 19: which cuBLASLt kernels (tile, cluster) run the bf16 squares 1024-4096 and the GPT-2 set, and how
# long each of ours and theirs takes in isolation (ncu, one launch at a time, caches flushed, clocks unlocked):
# per launch duration, DRAM / L2 bytes, SM and tensor-pipe throughput. Order of launches = the bench's order
# (per case: 3 warm-ups ours / cuBLAS in turns, then --reps 1 timed pair). Summary LAST (ncu_launches.py).
#   bash dev/gemm_sm90/run_s19_names.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=build-names
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a >$X/configure.log 2>&1
timeout 330 cmake --build $B -j16 --target camel >$X/build.log 2>&1
stamp "build rc $?"
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
for s in "square --sizes 1024,2048,4096" "gpt2"; do
    tag=${s%% *}
    timeout 200 ncu --clock-control none --kernel-name-base function -k 'regex:sm90|nvjet' --section SpeedOfLight --section LaunchStats --metrics $M --csv --page raw \
        $B/apps/camel/camel bench gemm --dtype bf16 --set $s --reps 1 >$X/ncu_$tag.csv 2>$X/ncu_$tag.err
    stamp "ncu $tag rc $? ($(wc -l <$X/ncu_$tag.csv) lines)"
done
for tag in square gpt2; do echo "== $tag"; python3 dev/gemm_sm90/ncu_launches.py $X/ncu_$tag.csv; done >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
