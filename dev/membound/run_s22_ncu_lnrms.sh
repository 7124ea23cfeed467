#!/usr/bin/env bash
# Session 22, for the next session: why the cluster form of nbs_kernel runs LayerNorm bf16 at 80% of a same-size
# copy where RMSNorm runs at 90% (1024 x 32768: the same geometry, 2 CTAs a row x 66 groups). ncu of both (one
# launch each per launch configuration, clocks unlocked, no cache control, so the partial sums see what the bench
# sees): time, instructions, IPC, issue, DRAM bytes read / written, stall reasons; then the top SASS lines by stall
# samples of each. camel-final = the final tree (build-s22x/).
#   XDIR=build-s22x bash dev/membound/run_s22_ncu_lnrms.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-final
M=gpu__time_duration.sum,launch__grid_size,sm__inst_executed.sum,sm__inst_executed.avg.per_cycle_active
M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum
M=$M,dram__throughput.avg.pct_of_peak_sustained_elapsed
for s in barrier long_scoreboard short_scoreboard mio_throttle wait not_selected math_pipe_throttle; do
    M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
for op in layernorm_bwd rmsnorm_bwd; do
    timeout 120 ncu --clock-control none --cache-control none --kernel-name-base mangled \
        -k 'regex:nbs_kernelILi2E|nb_partial_sum' --filter-mode per-launch-config --launch-skip 3 --launch-count 1 \
        --metrics $M --csv /tmp/bin/camel-final bench membound --mode cold --reps 20 --ops $op >$X/m_$op.csv 2>$X/m_$op.err
    stamp "ncu metrics $op rc $?"
    timeout 120 ncu --clock-control none --kernel-name-base mangled -k 'regex:nbs_kernelILi2E' --launch-skip 3 \
        --launch-count 1 --section SourceCounters -o $X/src_$op -f /tmp/bin/camel-final bench membound --mode cold \
        --reps 20 --ops $op >$X/src_$op.log 2>&1
    ncu -i $X/src_$op.ncu-rep --page source --csv --print-source sass >$X/src_$op.csv 2>$X/src_$op.err
    python3 dev/gemm_sm90/ncu_sass_stalls.py $X/src_$op.csv >$X/sass_$op.txt 2>&1
    stamp "ncu source $op"
done
python3 dev/membound/ncu_table.py $X/m_layernorm_bwd.csv $X/m_rmsnorm_bwd.csv >$X/table.txt 2>&1
python3 - $X/m_layernorm_bwd.csv $X/m_rmsnorm_bwd.csv >$X/dram.txt <<'PY'
import csv, sys
for f in sys.argv[1:]:
    rows = [r for r in csv.reader(open(f)) if len(r) > 10]
    h = rows[0]; ix = {k: i for i, k in enumerate(h)}
    for r in rows[1:]:
        if r[ix['Metric Name']].startswith('dram__bytes') or r[ix['Metric Name']] == 'launch__grid_size':
            print(f.split('/')[-1], r[ix['Kernel Name']][:34], r[ix['Metric Name']], r[ix['Metric Unit']], r[ix['Metric Value']])
PY
cat $X/stages.txt $X/table.txt $X/dram.txt
for op in layernorm_bwd rmsnorm_bwd; do echo "== $op"; head -14 $X/sass_$op.txt; done
