#!/usr/bin/env bash
# Session 21, for the next session's plan: ncu (one launch per launch configuration, clocks unlocked) of the kernels
# of the shapes still under 90% of the same-size copy, on the final tree (build-s21x/camel-final.xz): the norm
# backward (nbw / nbs / nbl / nbr and the partial sums) and the one-pass LayerNorm forward with its reset kernel.
# Table (dev/membound/ncu_table.py) printed last.
#   XDIR=build-s21x bash dev/membound/run_s21_ncu.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s21x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-final
M=gpu__time_duration.sum,launch__grid_size,launch__block_size,sm__inst_executed.sum,sm__inst_executed.avg.per_cycle_active
M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
M=$M,dram__throughput.avg.pct_of_peak_sustained_elapsed
for s in barrier long_scoreboard short_scoreboard mio_throttle lg_throttle wait math_pipe_throttle membar not_selected; do
    M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
for op in layernorm_bwd layernorm; do
    timeout 150 ncu --clock-control none --kernel-name-base mangled -k 'regex:nb[xcwlrs]_kernel|nb_partial|onepass|reset' \
        --filter-mode per-launch-config --launch-skip 2 --launch-count 1 --metrics $M --csv \
        /tmp/bin/camel-final bench membound --mode cold --reps 20 --ops $op >$X/ncu_$op.csv 2>$X/ncu_$op.err
    stamp "ncu $op rc $?"
done
python3 dev/membound/ncu_table.py $X/ncu_layernorm_bwd.csv $X/ncu_layernorm.csv >$X/ncu_table.txt 2>&1
cat $X/stages.txt $X/ncu_table.txt
