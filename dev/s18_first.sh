#!/usr/bin/env bash
# Session 18, first device call (issue 4):
# 1. synccheck of the row-sum exchange alone (dev/membound/xchg_synccheck.cu): clusters of 8 / 9 / 12 / 16 CTAs at
#    one and at four CTAs an SM, with and without a cluster barrier after every row (the "strong" form, whose order
#    is beyond doubt). Says whether session 17's "Missing wait" at cluster rank 8 (nbc_kernel, four CTAs an SM) is
#    the exchange's ordering or the tool.
# 2. ncu with per-instruction warp-state sampling (SourceCounters) of the norm-backward kernels of the shapes still
#    below 90% of a same-size copy: nbw (bf16 4096x4096), nbs (bf16 1024x32768 and 256x262144), nbl f32 (256x262144),
#    nbc f32 (1024x32768); the SASS source page as CSV for the reading at home.
#   bash dev/s18_first.sh; tar czf $OUT/logs.tgz -C /tmp/x .        (timeout_s 600; LIMIT 540 inside)
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-540}
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=/tmp/b18a
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$X/gpu.txt 2>&1
(cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a >$X/configure.log 2>&1 &&
    timeout 300 cmake --build $B -j14 --target camel >$X/build.log 2>&1
    echo "rc $?" >>$X/build.log) &
nvcc -std=c++17 -O2 -lineinfo -arch=sm_90a -o /tmp/xchg dev/membound/xchg_synccheck.cu >$X/xchg_build.log 2>&1
stamp "xchg build rc $?"
for v in "8 4 0" "9 4 0" "9 4 1" "9 1 0" "12 4 0" "16 4 0" "16 4 1" "16 1 0"; do
    n=xchg_$(echo $v | tr ' ' _)
    /tmp/xchg $v >$X/$n.plain.log 2>&1
    timeout 60 compute-sanitizer --tool synccheck --error-exitcode 99 /tmp/xchg $v >$X/$n.log 2>&1
    echo "rc $?" >>$X/$n.log
    stamp "$n: $(head -1 $X/$n.plain.log); synccheck $(tail -1 $X/$n.log), $(grep -c 'Missing wait' $X/$n.log) missing-wait, blocks $(grep -o 'block ([0-9]*' $X/$n.log | sed 's/block (//' | sort -n | uniq | head -8 | tr '\n' ' ')"
    [ $(stat -c %s $X/$n.log) -gt 30000 ] && { head -c 30000 $X/$n.log >$X/$n.cut; mv $X/$n.cut $X/$n.log; }
done
wait
stamp "camel build: $(tail -1 $X/build.log)"
[ "$(tail -1 $X/build.log)" = "rc 0" ] || exit 1
C=$B/apps/camel/camel
for spec in "nbw:nbw_kernelILi2ELb1E" "nbs:nbs_kernelILi2ELb1E" "nbl32:nbl_kernelILi0ELb1ELi4ELi1E" \
    "nbc32:nbc_kernelILi0ELb1ELi2E"; do
    IFS=: read -r name rx <<<"$spec"
    op=layernorm_bwd
    [ $(el) -gt $((LIMIT - 60)) ] && { stamp "ncu $name skipped (time)"; continue; }
    timeout 120 ncu --clock-control none --kernel-name-base mangled -k "regex:$rx" --filter-mode per-launch-config \
        --launch-skip 2 --launch-count 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
        --import-source no -o $X/ncu_$name -f $C bench membound --mode cold --reps 20 --ops $op >$X/ncu_$name.log 2>&1
    stamp "ncu $name rc $?"
    ncu -i $X/ncu_$name.ncu-rep --page source --csv --print-source sass >$X/src_$name.csv 2>$X/src_$name.err
    stamp "source page $name rc $? ($(wc -l <$X/src_$name.csv) lines)"
    ncu -i $X/ncu_$name.ncu-rep --page details --csv >$X/det_$name.csv 2>&1
done
ls -la $X | tail -40
cat $X/stages.txt
