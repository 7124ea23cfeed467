#!/usr/bin/env bash
# Session 29: test_gpu_gemm whole (the balanced grid's test included); timelines of the bf16 batched set (64 x 1024^3
# strided against the same problems as one 65536 x 1024 x 1024 GEMM, both 128 x 256 tiles in clusters of 2) on the
# balanced grid and on the full one; ncu DRAM bytes of the batched set on the balanced grid. Binaries built locally
# into build-s29x/ (camel-grid: the tree; camel-tl: -DCML_SM90_DEV_TIMELINE=1). Results in $OUT/s29_tl.tar.xz.
#   run(carry=["build-s29x"], command="XDIR=build-s29x bash dev/gemm_sm90/run_s29_tl.sh")
set -u
XDIR=${XDIR:-build-s29x}
. "$(dirname "$0")/../carried.sh"
unpack camel-grid camel-tl test_gpu_gemm
run_tests gemm
tests_summary
for g in balanced full; do
    mkdir -p $X/tl_$g
    CML_SM90_GRID=$g CML_SM90_TL_DIR=$X/tl_$g timeout 100 /tmp/bin/camel-tl bench gemm --dtype bf16 --set batched \
        --reps 3 >$X/tlbench_$g.txt 2>&1
    stamp "timelines $g rc $?"
    for f in $X/tl_$g/tl_*.txt; do
        echo "== $g $(basename $f)"
        python3 dev/gemm_sm90/timeline.py $f
    done >$X/timelines_$g.txt 2>&1
done
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct
timeout 150 ncu --clock-control none --kernel-name-base function -k 'regex:gemm_sm90' --section SpeedOfLight \
    --section LaunchStats --metrics $M --csv --page raw /tmp/bin/camel-grid bench gemm --dtype bf16,tf32 --set batched \
    --reps 3 >$X/ncu.csv 2>$X/ncu.err
stamp "ncu rc $?"
python3 dev/gemm_sm90/ncu_launches.py $X/ncu.csv >$X/ncu.txt 2>&1
tail -3 $X/test_gemm.log
cat $X/ncu.txt | cut -c1-200
head -60 $X/timelines_balanced.txt
mkdir -p ${OUT:-/tmp/out} && tar -C $X -cJf ${OUT:-/tmp/out}/s29_tl.tar.xz .
