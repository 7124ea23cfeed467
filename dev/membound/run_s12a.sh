#!/usr/bin/env bash
# Session 12 (helper h12a), one device call: the norm backward's deferred dx schedule in nbl_kernel
# (CML_NORM_BWD_DEFER=1, dev/membound/s12a_defer.patch, README "Session 12 (helper h12a)") against
# the base tree and against the same binary with CML_NORM_BWD_DEFER=0. Run from the repository
# root of the lead's tree (the patch under dev/membound/, applied or not):
#   bash dev/membound/run_s12a.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# 1. copies the tree twice without .git and build dirs: $W/o = base (the patch reverted where the
#    tree already has it), $W/n = new (the patch applied where it has not); norm_bits.c goes into
#    both as tests/gpu/zz_norm_bits.c; builds both at once (base niced), only the targets needed;
#    ptxas -v of the two changed files (registers, spills, C75xx) on the side;
# 2. in parallel, nothing timed: test_gpu_layernorm / test_gpu_rmsnorm of new with the defaults,
#    DEFER=1, DEFER=0 and DEFER=1 CLUSTER=0 (the cluster rows then run nbl_kernel, deferred);
#    compute-sanitizer memcheck + racecheck of both tests with DEFER=1 (whole test, and
#    test_deferred_rows alone in case the whole one runs past its time); norm_bits fingerprints
#    of base, new DEFER=0, new DEFER=1, new CLUSTER=0 with DEFER=0 and =1;
# 3. camel bench membound --ops layernorm_bwd,rmsnorm_bwd (steady and cold): base / new DEFER=0 /
#    new DEFER=1, three rounds in turn;
# 4. ncu of nbl_kernel (cold bench, one launch per launch configuration) with DEFER=0 and =1:
#    duration, IPC, barrier stalls per issue, DRAM %.
# Logs in /tmp/x; the summary (dev/membound/s12a_summary.py) is printed last.
# DRY=1: checks the patch against copies of this tree and runs the summary on made-up logs
# (locally: X=/tmp/h12a/x W=/tmp/h12a/w DRY=1 bash dev/membound/run_s12a.sh); nothing is built or run.
set -u
root=$(pwd)
X=${X:-/tmp/x}  # logs
W=${W:-/tmp}    # the trees: $W/o (base), $W/n (new)
P=$root/dev/membound/s12a_defer.patch
OPS=layernorm_bwd,rmsnorm_bwd
TESTS="test_gpu_layernorm test_gpu_rmsnorm"
rm -rf $X $W/o $W/n && mkdir -p $X $W/o $W/n
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a $X/stages.txt; }

# the two trees
for d in $W/o $W/n; do
    tar -C "$root" --exclude=./.git --exclude='./build*' -cf - . | tar -C $d -xf -
done
if (cd $W/o && git apply --check -R "$P" 2>/dev/null); then
    (cd $W/o && git apply -R "$P") && echo "tree has the patch: base = tree - patch" >$X/trees.txt
else
    (cd $W/n && git apply "$P") && echo "tree lacks the patch: new = tree + patch" >$X/trees.txt ||
        { stamp "patch does not apply"; exit 1; }
fi
for d in $W/o $W/n; do cp "$root/dev/membound/norm_bits.c" $d/tests/gpu/zz_norm_bits.c; done
grep -c CML_NORM_BWD_DEFER $W/o/src/kernels/cuda/norm/norm_bwd_long.cuh >>$X/trees.txt
grep -c CML_NORM_BWD_DEFER $W/n/src/kernels/cuda/norm/norm_bwd_long.cuh >>$X/trees.txt
stamp "trees ($(tr '\n' ' ' <$X/trees.txt))"

if [ "${DRY:-0}" = 1 ]; then
    python3 "$root/dev/membound/s12a_summary.py" --fake $X >/dev/null
    python3 "$root/dev/membound/s12a_summary.py" $X >$X/summary.txt 2>&1
    cat $X/summary.txt
    exit 0
fi

# 1. builds
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader >$X/gpu.txt 2>&1
CM="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W/o -B $W/o/b $CM >$X/configure_old.log 2>&1 &&
    nice -n 10 cmake --build $W/o/b -j16 --target camel zz_norm_bits >$X/build_old.log 2>&1
    echo "rc $?" >>$X/build_old.log) &
(cmake -S $W/n -B $W/n/b $CM >$X/configure_new.log 2>&1 &&
    cmake --build $W/n/b -j16 --target camel zz_norm_bits $TESTS >$X/build_new.log 2>&1
    echo "rc $?" >>$X/build_new.log) &
NV="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) -DCML_HAVE_CUDA=1 -Isrc -Iinclude -O3 -DNDEBUG --generate-code=arch=compute_90a,code=[compute_90a,sm_90a]"
for f in layernorm_bwd rmsnorm_bwd; do
    (cd $W/n && nice -n 10 $NV -Xptxas=--warn-on-spills -Xptxas -v -x cu -c src/kernels/cuda/norm/$f.cu \
        -o /tmp/ptxas_$f.o >$X/ptxas_$f.log 2>&1; echo "rc $?" >>$X/ptxas_$f.log) &
done
wait
stamp "built: old $(tail -1 $X/build_old.log), new $(tail -1 $X/build_new.log)"
[ "$(tail -1 $X/build_new.log)" = "rc 0" ] || { grep -E 'error' $X/build_new.log | head -20; exit 1; }
N=$W/n/b
O=$W/o/b

# 2. checks
(cd $O/tests && timeout 150 ./zz_norm_bits >$X/bits_base.txt 2>&1; echo "rc $?" >>$X/bits_base.txt) &
for k in "CML_NORM_BWD_DEFER=0" "CML_NORM_BWD_DEFER=1" "CML_NORM_BWD_CLUSTER=0 CML_NORM_BWD_DEFER=0" \
    "CML_NORM_BWD_CLUSTER=0 CML_NORM_BWD_DEFER=1"; do
    tag=$(echo "$k" | tr ' =' '_-')
    (cd $N/tests && env $k timeout 150 ./zz_norm_bits >$X/bits_$tag.txt 2>&1; echo "rc $?" >>$X/bits_$tag.txt) &
done
for t in $TESTS; do
    (cd $N/tests && timeout 150 ./$t >$X/${t}_default.log 2>&1; echo "rc $?" >>$X/${t}_default.log) &
    for k in "CML_NORM_BWD_DEFER=1" "CML_NORM_BWD_DEFER=0" "CML_NORM_BWD_CLUSTER=0 CML_NORM_BWD_DEFER=1"; do
        tag=$(echo "$k" | tr ' =' '_-')
        (cd $N/tests && env $k timeout 150 ./$t >$X/${t}_$tag.log 2>&1; echo "rc $?" >>$X/${t}_$tag.log) &
    done
    for tool in memcheck racecheck; do
        (cd $N/tests && CML_NORM_BWD_DEFER=1 CML_TEST_SANITIZER=1 timeout 150 compute-sanitizer --tool $tool \
            --error-exitcode 99 --report-api-errors no ./$t >$X/san_${tool}_$t.log 2>&1
            echo "rc $?" >>$X/san_${tool}_$t.log) &
        (cd $N/tests && CML_NORM_BWD_DEFER=1 CML_TEST_ONLY=test_deferred_rows CML_TEST_SANITIZER=1 timeout 150 \
            compute-sanitizer --tool $tool --error-exitcode 99 --report-api-errors no ./$t \
            >$X/san_${tool}_${t}_deferred.log 2>&1
            echo "rc $?" >>$X/san_${tool}_${t}_deferred.log) &
    done
done
wait
stamp "checks done"

# 3. benches in turns
for i in 1 2 3; do
    $O/apps/camel/camel bench membound --ops $OPS >$X/bench_base_$i.txt 2>&1
    CML_NORM_BWD_DEFER=0 $N/apps/camel/camel bench membound --ops $OPS >$X/bench_d0_$i.txt 2>&1
    CML_NORM_BWD_DEFER=1 $N/apps/camel/camel bench membound --ops $OPS >$X/bench_d1_$i.txt 2>&1
    stamp "bench round $i"
done

# 4. ncu of nbl_kernel, both schedules
M=gpu__time_duration.sum,launch__grid_size,sm__inst_executed.avg.per_cycle_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio
for v in 0 1; do
    CML_NORM_BWD_DEFER=$v timeout 30 ncu --clock-control none --kernel-name-base mangled -k 'regex:nbl_kernel' \
        --filter-mode per-launch-config --launch-skip 2 --launch-count 1 --metrics $M --csv \
        $N/apps/camel/camel bench membound --mode cold --reps 20 --ops $OPS >$X/ncu_d$v.csv 2>$X/ncu_d$v.err
    echo "rc $?" >>$X/ncu_d$v.err
done
stamp "ncu done"
python3 "$root/dev/membound/s12a_summary.py" $X >$X/summary.txt 2>&1
cat $X/stages.txt
cat $X/summary.txt
