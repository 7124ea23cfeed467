#!/usr/bin/env bash
# Session 18: where the time of the norm backward calls still below 90% of a same-size copy goes, kernel by kernel
# (the row kernel vs nb_partial_sum*), plus the two other shapes under the line (LayerNorm forward bf16 256x262144,
# fp8 conversion with amax f32 4096x1024): ncu durations with the L2 left as the previous kernel left it
# (--cache-control none) and no clock lock, one launch per kernel and launch configuration; nsys's kernel summary of
# a steady bench run if nsys is there.
#   bash dev/membound/run_s18_times.sh; tar czf $OUT/logs.tgz -C /tmp/x .       (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=/tmp/b18t
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a >$X/configure.log 2>&1
timeout 300 cmake --build $B -j16 --target camel >$X/build.log 2>&1
stamp "build rc $?"
C=$B/apps/camel/camel
M=gpu__time_duration.sum,launch__grid_size,launch__block_size,dram__bytes_read.sum,dram__bytes_write.sum
M=$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
for op in layernorm_bwd rmsnorm_bwd layernorm convert_scaled_e4m3_amax; do
    timeout 120 ncu --clock-control none --cache-control none --kernel-name-base function \
        --filter-mode per-launch-config --launch-skip 3 --launch-count 1 --metrics $M --csv \
        $C bench membound --mode steady --batches 3 --ops $op >$X/ncu_$op.csv 2>$X/ncu_$op.err
    stamp "ncu $op rc $? ($(wc -l <$X/ncu_$op.csv) lines)"
done
if command -v nsys >/dev/null 2>&1; then
    timeout 150 nsys profile -o $X/prof --force-overwrite true --stats=false \
        $C bench membound --mode steady --ops layernorm_bwd,rmsnorm_bwd >$X/nsys.log 2>&1
    nsys stats --report cuda_gpu_kern_sum --format csv -o $X/kern $X/prof.nsys-rep >>$X/nsys.log 2>&1
    nsys stats --report cuda_gpu_trace --format csv -o $X/trace $X/prof.nsys-rep >>$X/nsys.log 2>&1
    rm -f $X/prof.nsys-rep $X/prof.sqlite
    stamp "nsys rc $?"
else
    stamp "no nsys"
fi
cat $X/stages.txt
