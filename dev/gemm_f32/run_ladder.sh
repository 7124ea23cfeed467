#!/usr/bin/env bash
# On the GPU machine: builds the ladder, dumps the resource report and SASS
# statistics of the main configurations, times every version against cuBLAS,
# and profiles cuBLAS and two versions at 4096 with Nsight Compute.
#   dev/gemm_f32/run_ladder.sh [ladder args...]     (writes to $OUT or /tmp/ladder)
set -u
out=${OUT:-/tmp/ladder}
mkdir -p "$out"
bin=/tmp/sgemm_ladder
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I src -I include -lineinfo -Xptxas=-v \
    dev/gemm_f32/sgemm_ladder.cu -lcublas -o $bin >"$out/ptxas.txt" 2>&1 || { cat "$out/ptxas.txt"; exit 1; }
sass_stats() { # mangled name -> instruction counts of the whole kernel
    cuobjdump -sass -fun "$1" $bin >"$out/$2" 2>&1
    printf '%-10s' "$2:"
    for op in FFMA 'LDS.128' 'LDS ' 'STS' 'LDG' 'LDL' 'STL' 'BAR'; do
        printf ' %s=%s' "$op" "$(grep -c -- "$op" "$out/$2")"
    done
    echo
}
sass_stats _Z11tile_kernelILi128ELi128ELi8ELb0ELb0ELi2ELi2EEviiiPKfxS1_xPfx sass_128x128x8_nn.txt
sass_stats _Z11tile_kernelILi256ELi128ELi8ELb0ELb0ELi2ELi1EEviiiPKfxS1_xPfx sass_256x128x8_nn.txt
$bin "$@" 2>&1 | tee "$out/ladder.txt"
for v in 5 7; do
    ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section LaunchStats \
        --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis_Tables \
        $bin --sizes 4096 --once $v >"$out/ncu_v$v.txt" 2>&1
done
grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Block Size|Grid Size|Compute \(SM\) Throughput|Achieved Occupancy|Issue Slots Busy|No Eligible|Bank" "$out/ncu_v5.txt" | head -60
