#!/usr/bin/env bash
# Session 9 (helper h9n), one device call: the cluster norm backward (src/kernels/cuda/norm/
# norm_bwd_cluster.cuh) against the row-sync path it replaces, in the SAME binary:
# CML_NORM_BWD_CLUSTER=0 sends the rows back to nbl_kernel (norm_bwd_long.cuh, not changed), so
# "old" is exactly the base tree's kernel sequence (memset, nbl_kernel, partial sum). The
# binaries are built on the local machine (build-cuda: camel, test_gpu_layernorm,
# test_gpu_rmsnorm) and carried as one archive, so the call spends no device time building:
#   bash /tmp/w/dev/membound/s9n_ab.sh build-ab/h9n-bin.tar.xz
# 1. in parallel (nothing timed): both tests with the defaults and with each knob, and
#    compute-sanitizer memcheck + racecheck of both tests (CML_TEST_SANITIZER=1);
# 2. camel bench membound --ops layernorm_bwd,rmsnorm_bwd (steady and cold), old / new / knobs
#    alternating, twice;
# 3. ncu, one launch per kernel and launch configuration of the norm backward kernels (new
#    build, cold bench): which kernel runs where, cluster size, duration, stalls, DRAM.
# Logs in /tmp/x, packed into $OUT/logs.tgz after every stage; the summary is printed last.
set -u
bin_tar=$1
root=$(pwd)
X=/tmp/x
B=/tmp/bin
rm -rf $X $B && mkdir -p $X $B
pack() { tar czf "$OUT/logs.tgz" -C $X . 2>/dev/null; }
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a $X/stages.txt; }
OPS=layernorm_bwd,rmsnorm_bwd
TESTS="test_gpu_layernorm test_gpu_rmsnorm"
# Knobs of the new build, each benched after each new run and tested once. Call 1 (the tree of
# s9n_pipe_barrier.patch, where 8 was the default largest cluster): CML_NORM_BWD_PIPE=1
# CML_NORM_BWD_ASYNC=0 CML_NORM_BWD_CLUSTER=16. In the library now: CML_NORM_BWD_CLUSTER=8 / =0.
KNOBS=${KNOBS-"CML_NORM_BWD_CLUSTER=8"}
OLD=CML_NORM_BWD_CLUSTER=0

tar xJf "$root/$bin_tar" -C $B || { stamp "unpack FAILED"; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader >$X/gpu.txt 2>&1
stamp "unpacked"

for t in $TESTS; do
    (cd $B && timeout 150 ./$t >$X/$t.log 2>&1; echo "rc $?" >>$X/$t.log) &
    for k in $KNOBS $OLD; do
        (cd $B && env $k timeout 150 ./$t >$X/${t}_$k.log 2>&1; echo "rc $?" >>$X/${t}_$k.log) &
    done
    for tool in memcheck racecheck; do
        (cd $B && CML_TEST_SANITIZER=1 timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 \
            --report-api-errors no ./$t >$X/san_${tool}_$t.log 2>&1
            echo "rc $?" >>$X/san_${tool}_$t.log) &
        # the new test alone too, in case the whole test runs past its time under the tool
        (cd $B && CML_TEST_ONLY=test_cluster_rows CML_TEST_SANITIZER=1 timeout 120 compute-sanitizer --tool $tool \
            --error-exitcode 99 --report-api-errors no ./$t >$X/san_${tool}_${t}_cluster.log 2>&1
            echo "rc $?" >>$X/san_${tool}_${t}_cluster.log) &
    done
done
wait
stamp "checks done"
pack

for i in 1 2; do
    env $OLD $B/camel bench membound --ops $OPS >$X/bench_old_$i.txt 2>&1
    stamp "bench old $i"
    $B/camel bench membound --ops $OPS >$X/bench_new_$i.txt 2>&1
    stamp "bench new $i"
    for k in $KNOBS; do
        env $k $B/camel bench membound --ops $OPS >$X/bench_new_${k}_$i.txt 2>&1
        stamp "bench new $k $i"
    done
    pack
done

M=gpu__time_duration.sum,launch__grid_size,sm__inst_executed.avg.per_cycle_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio
for v in new; do
    timeout 25 ncu --clock-control none --kernel-name-base mangled -k 'regex:nb[cl]_kernel' \
        --filter-mode per-launch-config --launch-skip 2 --launch-count 1 --metrics $M --csv \
        $B/camel bench membound --mode cold --reps 20 --ops $OPS >$X/ncu_$v.csv 2>$X/ncu_$v.err
    echo "rc $?" >>$X/ncu_$v.err
done
stamp "ncu done"
python3 /tmp/w/dev/membound/s9_summary.py $X >$X/summary.txt 2>&1
pack
cat $X/summary.txt
cat $X/stages.txt
