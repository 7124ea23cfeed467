#!/usr/bin/env bash
# Session 22: where the staged kernel's fixed cost a row goes. ncu (SourceCounters + WarpStateStats, the 4th launch
# of the kernel: 1024 x 32768, clocks unlocked) of the row-sync form of the LayerNorm backward, bf16, at a least row
# of 12 KB (CML_NORM_BWD_STAGED=3, CML_DEV_NBG_MINROW=12288: 12 CTAs a row x 11 groups, ~93 rows a CTA), and of its
# cluster form (mode 1: 2 CTAs a row x 66 groups);
# the top SASS lines by stall samples last. camel-new = f06cbf4 + s22_minrow_env.patch (build-s22x/).
#   XDIR=build-s22x bash dev/membound/run_s22_ncu_rows.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-new
for v in rows cluster; do
    if [ $v = rows ]; then e="CML_NORM_BWD_STAGED=3 CML_DEV_NBG_MINROW=12288"; k='nbs_kernelILi2ELb1ELb1EE'
    else e="CML_NORM_BWD_STAGED=1"; k='nbs_kernelILi2ELb1ELb0EE'; fi
    env $e timeout 250 ncu --clock-control none --kernel-name-base mangled -k "regex:$k" \
        --launch-skip 3 --launch-count 1 --section SourceCounters \
        --section WarpStateStats --section SpeedOfLight --section LaunchStats -o $X/src_$v -f \
        /tmp/bin/camel-new bench membound --mode cold --reps 20 --ops layernorm_bwd >$X/src_$v.log 2>&1
    stamp "ncu $v rc $?"
    ncu -i $X/src_$v.ncu-rep --page source --csv --print-source sass >$X/src_$v.csv 2>$X/src_$v.err
    ncu -i $X/src_$v.ncu-rep --page details --csv >$X/det_$v.csv 2>>$X/src_$v.err
    python3 dev/gemm_sm90/ncu_sass_stalls.py $X/src_$v.csv >$X/sass_$v.txt 2>&1
done
cat $X/stages.txt
for v in rows cluster; do
    echo "== $v"; grep -E '"(Duration|Grid Size|Dynamic Shared Memory Per Block|DRAM Throughput|Issue Slots Busy)"' \
        $X/det_$v.csv | cut -d, -f5,13-16 | head -20
    head -40 $X/sass_$v.txt
done
