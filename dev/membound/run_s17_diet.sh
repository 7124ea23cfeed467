#!/usr/bin/env bash
# Session 17, ONE device call: (a) the norm backward's arithmetic diet (patch dev/membound/s17_diet.patch:
# norm_bwd_math.cuh, 16-bit LayerNorm xhat as one fma with -mean rstd and dx as two fmas with row constants, in
# nbr / nbw / nbl (KW 4) / nbc / nbx; f32 and RMSNorm SASS unchanged) against today's kernels, in turns; (b) an ncu
# probe of both builds' norm backward kernels (one launch per launch configuration: duration, IPC, issue-slot use,
# DRAM %, stall reasons per issue), which says whether these kernels are bound by issue, latency or barriers.
# From the repository root (timeout_s 600; LIMIT 520 s inside):
#   bash dev/membound/run_s17_diet.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# Steps: ab_trees (dev/ab_lib.sh: new = patch applied, base = without), both built at once (camel; new also the two
# norm tests); the tests whole on new plus memcheck of test_wide_rows; ncu on both; camel bench membound --ops
# layernorm_bwd,rmsnorm_bwd --mode both, base / new in turns, ROUNDS rounds; summary (dev/membound/ab_summary.py)
# and the ncu table LAST.
# Decision (fixed before the run): keep the patch if layernorm_bwd 16-bit steady base/new >= 1.02 at one of the
# shapes below 90% of a same-size copy (4096x4096, 1024x32768, 256x262144) and no shape of either op < 0.99, tests
# clean; f32 and RMSNorm rows are controls (~1.00).
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-520}
ROUNDS=${ROUNDS:-3}
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x W=/tmp/w17n BASE=/tmp/b17n
root=$(pwd)
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
. dev/ab_lib.sh
ab_trees $W $BASE $root/dev/membound/s17_diet.patch >$X/trees.txt 2>&1 || { cat $X/trees.txt; exit 1; }
stamp "trees: $(tr '\n' ' ' <$X/trees.txt)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$X/gpu.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
TESTS="test_gpu_layernorm test_gpu_rmsnorm"
(cmake -S $W -B $W/b $CM >$W/configure.log 2>&1 &&
    timeout 300 cmake --build $W/b -j16 --target camel $TESTS >$W/build.log 2>&1
    echo "rc $?" >>$W/build.log) &
(cmake -S $BASE -B $BASE/b $CM >$BASE/configure.log 2>&1 &&
    timeout 300 nice -n 5 cmake --build $BASE/b -j16 --target camel >$BASE/build.log 2>&1
    echo "rc $?" >>$BASE/build.log) &
wait
for b in $W $BASE; do tail -c 100000 $b/build.log >$X/build_$(basename $b).log; done
stamp "built: new $(tail -1 $W/build.log), base $(tail -1 $BASE/build.log)"
for b in $W $BASE; do
    [ "$(tail -1 $b/build.log)" = "rc 0" ] || { stamp "$b build failed"; grep -E 'error' $b/build.log | head -20; exit 1; }
done
N=$W/b O=$BASE/b
for t in $TESTS; do
    (cd $N/tests && timeout 170 ./$t >$X/test_$t.log 2>&1; echo "rc $?" >>$X/test_$t.log) &
done
(cd $N/tests && CML_TEST_ONLY=test_wide_rows CML_TEST_SANITIZER=1 timeout 170 compute-sanitizer --tool memcheck \
    --error-exitcode 99 --report-api-errors no ./test_gpu_layernorm >$X/san_memcheck.log 2>&1
    echo "rc $?" >>$X/san_memcheck.log) &
wait
sed -i 's/^ok .*//' $X/test_*.log
stamp "tests: $(for f in $X/test_*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
M=gpu__time_duration.sum,launch__grid_size,launch__block_size,sm__inst_executed.sum,sm__inst_executed.avg.per_cycle_active
M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
M=$M,dram__throughput.avg.pct_of_peak_sustained_elapsed
for s in barrier long_scoreboard short_scoreboard mio_throttle lg_throttle wait math_pipe_throttle membar not_selected; do
    M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
for v in base new; do
    B=$O; [ $v = new ] && B=$N
    timeout 80 ncu --clock-control none --kernel-name-base mangled -k 'regex:nb[xcwlr]_kernel' \
        --filter-mode per-launch-config --launch-skip 2 --launch-count 1 --metrics $M --csv \
        $B/apps/camel/camel bench membound --mode cold --reps 20 --ops layernorm_bwd,rmsnorm_bwd \
        >$X/ncu_$v.csv 2>$X/ncu_$v.err
    echo "rc $?" >>$X/ncu_$v.err
done
stamp "ncu: base $(tail -1 $X/ncu_base.err), new $(tail -1 $X/ncu_new.err)"
last=0
for r in $(seq 1 $ROUNDS); do
    [ $(($(el) + last + 10)) -gt $LIMIT ] && { stamp "round $r skipped (a round took $last s)"; break; }
    rs=$(el)
    vs="base new"; [ $((r % 2)) = 0 ] && vs="new base"
    for v in $vs; do
        B=$O; [ $v = new ] && B=$N
        timeout 100 $B/apps/camel/camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both \
            --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
    last=$(($(el) - rs))
done
python3 $root/dev/membound/ab_summary.py $X >$X/summary.txt 2>&1
python3 $root/dev/membound/ncu_table.py $X/ncu_base.csv $X/ncu_new.csv >$X/ncu_table.txt 2>&1
cat $X/stages.txt $X/ncu_table.txt $X/summary.txt
