#!/usr/bin/env bash
# Session 22: the staged norm backward's mean / rstd from a shared-memory table (nbs_stats_load) instead of per-row
# global loads that became uniform registers at the loop's top (~25% of its stall samples in run_s22_ncu_rows.sh).
# camel-prev = f06cbf4 (+ s22_minrow_env.patch, off by default), camel-new = this change; built locally in
# build-s22x/. Steps: test_gpu_layernorm / rmsnorm whole; memcheck / racecheck of both tests' test_staged_rows;
# camel bench membound (the norm backward) prev / new in turns, ROUNDS rounds; ncu of the new cluster form at
# 1024 x 32768 (as run_s22_ncu_rows.sh); the summary last.
#   XDIR=build-s22x bash dev/membound/run_s22_stats.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
run_tests layernorm rmsnorm
TOOLS="memcheck racecheck" TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_staged_rows &
TOOLS="memcheck racecheck" TAG=rms_ sanitize /tmp/bin/test_gpu_rmsnorm test_staged_rows &
wait
tests_summary
in_turns ${ROUNDS:-3} "prev new" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X prev >$X/summary.txt 2>&1
CML_NORM_BWD_STAGED=1 timeout 250 ncu --clock-control none --kernel-name-base mangled -k "regex:nbs_kernelILi2ELb1ELb0EE" \
    --launch-skip 3 --launch-count 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
    -o $X/src_cluster -f /tmp/bin/camel-new bench membound --mode cold --reps 20 --ops layernorm_bwd >$X/src_cluster.log 2>&1
ncu -i $X/src_cluster.ncu-rep --page source --csv --print-source sass >$X/src_cluster.csv 2>$X/src_cluster.err
python3 dev/gemm_sm90/ncu_sass_stalls.py $X/src_cluster.csv >$X/sass_cluster.txt 2>&1
cat $X/stages.txt $X/summary.txt; head -16 $X/sass_cluster.txt
