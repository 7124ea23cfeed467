#!/usr/bin/env bash
# Session 13 (built by helper h12i in session 12), one device call: the norm backward's partial-sum
# variants (CML_NORM_BWD_PSUM=1), nbl_kernel's DEFER 2 (CML_NORM_BWD_DEFER=2: the next row's loads
# before pass 1) and plan B's step 0 (CML_NORM_BWD_FUSED=all CML_NORM_BWD_KW=2 at 4096x4096), patch
# dev/membound/s13_norm.patch, README "Session 12 (helper h12i)". Run from the lead's tree root:
#   bash dev/membound/run_s13_norm.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# 1. copies the tree twice without .git and build dirs: $W/o = base (the patch reverted where the tree
#    has it), $W/n = new (applied where it has not); norm_bits.c into both as tests/gpu/zz_norm_bits.c;
#    builds both at once (base niced, only camel + zz_norm_bits), ptxas -v of the two changed .cu files;
# 2. in parallel, nothing timed: test_gpu_layernorm / test_gpu_rmsnorm of new with the defaults, PSUM=1,
#    DEFER=2, PSUM=1 DEFER=2, CLUSTER=0 DEFER=2; memcheck + racecheck of test_partial_sums and
#    test_deferred_rows alone (the whole tests ran past 150 s under racecheck in session 12);
#    norm_bits fingerprints of base and new under n / p / e / CLUSTER=0 e / f (below);
# 3. camel bench membound --ops layernorm_bwd,rmsnorm_bwd, steady + cold, in turns, 3 rounds (a round
#    is skipped past 400 s): base, n = new defaults, p = PSUM=1, e = PSUM=1 DEFER=2, f = FUSED=all KW=2;
# 4. ncu (--cache-control none --clock-control none, cold bench, one launch per launch configuration):
#    nbl_kernel + nb_partial* under n and e (duration, IPC, stalls, DRAM %); then plan B step 0 on the
#    --quick shapes (4096x1024, 4096x4096): nbl_kernel|bwd_rows_kernel|nbr_kernel|nb_partial* under n and f.
# Logs in /tmp/x; the summary (dev/membound/s13_norm_summary.py) is printed last.
# DRY=1: checks the patch against copies of this tree and runs the summary on made-up logs
# (locally: X=/tmp/h12i/x W=/tmp/h12i/w DRY=1 bash dev/membound/run_s13_norm.sh); nothing is built or run.
set -u
root=$(pwd)
X=${X:-/tmp/x}  # logs
W=${W:-/tmp}    # the trees: $W/o (base), $W/n (new)
P=$root/dev/membound/s13_norm.patch
S=$root/dev/membound/s13_norm_summary.py
OPS=layernorm_bwd,rmsnorm_bwd
TESTS="test_gpu_layernorm test_gpu_rmsnorm"
rm -rf $X $W/o $W/n && mkdir -p $X $W/o $W/n
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
# the variants of the new binary (tag = env)
declare -A VAR=([n]="" [p]="CML_NORM_BWD_PSUM=1" [e]="CML_NORM_BWD_PSUM=1 CML_NORM_BWD_DEFER=2"
    [f]="CML_NORM_BWD_FUSED=all CML_NORM_BWD_KW=2")

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
grep -c CML_NORM_BWD_PSUM $W/o/src/kernels/cuda/norm/norm_bwd_partial.cuh >>$X/trees.txt
grep -c CML_NORM_BWD_PSUM $W/n/src/kernels/cuda/norm/norm_bwd_partial.cuh >>$X/trees.txt
stamp "trees ($(tr '\n' ' ' <$X/trees.txt))"

if [ "${DRY:-0}" = 1 ]; then
    python3 "$S" --fake $X >/dev/null
    python3 "$S" $X >$X/summary.txt 2>&1
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
(cd $O/tests && timeout 120 ./zz_norm_bits >$X/bits_base.txt 2>&1; echo "rc $?" >>$X/bits_base.txt) &
for v in n p e f; do
    (cd $N/tests && env ${VAR[$v]} timeout 120 ./zz_norm_bits >$X/bits_$v.txt 2>&1; echo "rc $?" >>$X/bits_$v.txt) &
done
(cd $N/tests && env CML_NORM_BWD_CLUSTER=0 ${VAR[e]} timeout 120 ./zz_norm_bits >$X/bits_c0e.txt 2>&1
    echo "rc $?" >>$X/bits_c0e.txt) &
for t in $TESTS; do
    for k in "default" "CML_NORM_BWD_PSUM=1" "CML_NORM_BWD_DEFER=2" "CML_NORM_BWD_PSUM=1 CML_NORM_BWD_DEFER=2" \
        "CML_NORM_BWD_CLUSTER=0 CML_NORM_BWD_DEFER=2"; do
        tag=$(echo "$k" | tr ' =' '_-')
        ev=$k; [ "$k" = default ] && ev=""
        (cd $N/tests && env $ev timeout 150 ./$t >$X/${t}_$tag.log 2>&1; echo "rc $?" >>$X/${t}_$tag.log) &
    done
    for tool in memcheck racecheck; do
        for only in test_partial_sums test_deferred_rows; do
            (cd $N/tests && CML_TEST_ONLY=$only CML_TEST_SANITIZER=1 timeout 150 compute-sanitizer --tool $tool \
                --error-exitcode 99 --report-api-errors no ./$t >$X/san_${tool}_${t}_$only.log 2>&1
                echo "rc $?" >>$X/san_${tool}_${t}_$only.log) &
        done
    done
done
wait
stamp "checks done"

# 3. benches in turns
for i in 1 2 3; do
    [ $(el) -gt 400 ] && { stamp "bench round $i skipped (time)"; break; }
    $O/apps/camel/camel bench membound --ops $OPS >$X/bench_base_$i.txt 2>&1
    for v in n p e f; do
        env ${VAR[$v]} $N/apps/camel/camel bench membound --ops $OPS >$X/bench_${v}_$i.txt 2>&1
    done
    stamp "bench round $i"
done

# 4. ncu
M=gpu__time_duration.sum,launch__grid_size,launch__block_size,sm__inst_executed.avg.per_cycle_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio
NCU="ncu --cache-control none --clock-control none --kernel-name-base mangled --filter-mode per-launch-config --launch-skip 2 --launch-count 1 --metrics $M --csv"
for v in n e; do
    [ $(el) -gt 470 ] && { stamp "ncu $v skipped (time)"; continue; }
    env ${VAR[$v]} timeout 45 $NCU -k 'regex:nbl_kernel|nb_partial' $N/apps/camel/camel bench membound --mode cold \
        --reps 20 --ops $OPS >$X/ncu_$v.csv 2>$X/ncu_$v.err
    echo "rc $?" >>$X/ncu_$v.err
    stamp "ncu $v"
done
for v in n f; do
    [ $(el) -gt 520 ] && { stamp "ncu B $v skipped (time)"; continue; }
    env ${VAR[$v]} timeout 25 $NCU -k 'regex:nbl_kernel|bwd_rows_kernel|nbr_kernel|nb_partial' $N/apps/camel/camel \
        bench membound --quick --mode cold --reps 20 --ops $OPS >$X/ncuB_$v.csv 2>$X/ncuB_$v.err
    echo "rc $?" >>$X/ncuB_$v.err
    stamp "ncu B $v"
done
python3 "$S" $X >$X/summary.txt 2>&1
cat $X/stages.txt
cat $X/summary.txt
