#!/usr/bin/env bash
# Session 13 (helper h13c), one device call: the LayerNorm / RMSNorm forward's v2 kernels for 16-bit rows
# on chip (CML_NORM_FWD_V2: 0 = the old kernels, 1 = hardware pack, 2 = pack + residency, the default),
# patch dev/membound/s13_normfwd.patch, README "Session 13 (helper h13c)". Run from the lead's tree root:
#   bash dev/membound/run_s13_normfwd.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# 1. copies the tree twice without .git and build dirs: $W/o = base (the patch reverted where the tree
#    has it), $W/n = new (applied where it has not); norm_bits.c into both as tests/gpu/zz_norm_bits.c;
#    builds both at once (base niced: camel + zz_norm_bits; new: + the two tests), ptxas -v of the two
#    changed .cu files of new on the side (registers, spills, C75xx);
# 2. in parallel, nothing timed (<= 120 s): test_fwd_v2 alone of both tests under the default and
#    CML_NORM_FWD_V2=0 (it forces modes 1 and 2 in-process, checks y / mean / rstd bitwise against mode 0
#    and that each mode's kernels ran); memcheck + racecheck of test_fwd_v2 alone; norm_bits fingerprints
#    of base and of new under V2=0 / 1 / 2 (must all be equal; mode 0 is the base's SASS);
# 3. camel bench membound --ops layernorm,rmsnorm (steady + cold), base / n0 / n1 / n2 in turns, 3 rounds
#    (a round is skipped past 400 s);
# 4. ncu of the bf16 forward kernels under n0 and n2 (--cache-control none, cold bench, one launch per
#    launch configuration: duration, IPC, instructions, DRAM %, occupancy, stalls), skipped past 430 s;
# 5. the whole tests of new (default) alone on the GPU in the time left (30-240 s box; in session 13 the
#    whole rmsnorm test ran past a 150 s box when sharing the GPU with 9 other processes).
# Logs in /tmp/x; the summary (dev/membound/s13_normfwd_summary.py) is printed last.
# DRY=1: checks the patch against copies of this tree and runs the summary on made-up logs
# (locally: X=/tmp/h13c/x W=/tmp/h13c/w DRY=1 bash dev/membound/run_s13_normfwd.sh); nothing is built or run.
set -u
root=$(pwd)
X=${X:-/tmp/x}  # logs
W=${W:-/tmp}    # the trees: $W/o (base), $W/n (new)
P=$root/dev/membound/s13_normfwd.patch
S=$root/dev/membound/s13_normfwd_summary.py
OPS=layernorm,rmsnorm
TESTS="test_gpu_layernorm test_gpu_rmsnorm"
rm -rf $X $W/o $W/n && mkdir -p $X $W/o $W/n
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
# the variants of the new binary (tag = env)
declare -A VAR=([n0]="CML_NORM_FWD_V2=0" [n1]="CML_NORM_FWD_V2=1" [n2]="CML_NORM_FWD_V2=2")

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
ls $W/o/src/kernels/cuda/norm/norm_fwd_v2.cuh 2>&1 | tail -1 >>$X/trees.txt
ls $W/n/src/kernels/cuda/norm/norm_fwd_v2.cuh 2>&1 | tail -1 >>$X/trees.txt
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
for f in layernorm_fwd rmsnorm_fwd; do
    (cd $W/n && nice -n 10 $NV -Xptxas=--warn-on-spills -Xptxas -v -x cu -c src/kernels/cuda/norm/$f.cu \
        -o /tmp/ptxas_$f.o >$X/ptxas_$f.log 2>&1; echo "rc $?" >>$X/ptxas_$f.log) &
done
wait
stamp "built: old $(tail -1 $X/build_old.log), new $(tail -1 $X/build_new.log)"
[ "$(tail -1 $X/build_new.log)" = "rc 0" ] || { grep -E 'error' $X/build_new.log | head -20; exit 1; }
[ "$(tail -1 $X/build_old.log)" = "rc 0" ] || { grep -E 'error' $X/build_old.log | head -20; exit 1; }
N=$W/n/b
O=$W/o/b

# 2. checks (short ones; the whole tests come last, step 5)
(cd $O/tests && timeout 120 ./zz_norm_bits >$X/bits_base.txt 2>&1; echo "rc $?" >>$X/bits_base.txt) &
for v in n0 n1 n2; do
    (cd $N/tests && env ${VAR[$v]} timeout 120 ./zz_norm_bits >$X/bits_$v.txt 2>&1; echo "rc $?" >>$X/bits_$v.txt) &
done
for t in $TESTS; do
    # test_fwd_v2 forces its modes in-process, whatever the environment says
    for k in "default" "CML_NORM_FWD_V2=0"; do
        tag=$(echo "$k" | tr ' =' '_-')
        ev=$k; [ "$k" = default ] && ev=""
        (cd $N/tests && env $ev CML_TEST_ONLY=test_fwd_v2 timeout 120 ./$t >$X/${t}_fwd_v2_$tag.log 2>&1
            echo "rc $?" >>$X/${t}_fwd_v2_$tag.log) &
    done
    for tool in memcheck racecheck; do
        (cd $N/tests && CML_TEST_ONLY=test_fwd_v2 CML_TEST_SANITIZER=1 timeout 120 compute-sanitizer --tool $tool \
            --error-exitcode 99 --report-api-errors no ./$t >$X/san_${tool}_$t.log 2>&1
            echo "rc $?" >>$X/san_${tool}_$t.log) &
    done
done
wait
stamp "checks done"

# 3. benches in turns
for i in 1 2 3; do
    [ $(el) -gt 400 ] && { stamp "bench round $i skipped (time)"; break; }
    $O/apps/camel/camel bench membound --ops $OPS >$X/bench_base_$i.txt 2>&1
    for v in n0 n1 n2; do
        env ${VAR[$v]} $N/apps/camel/camel bench membound --ops $OPS >$X/bench_${v}_$i.txt 2>&1
    done
    stamp "bench round $i"
done

# 4. ncu of the bf16 forward kernels (DT 2 = bf16 in the mangled names)
M=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,sm__inst_executed.avg.per_cycle_active,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio
NCU="ncu --print-units base --cache-control none --clock-control none --kernel-name-base mangled --filter-mode per-launch-config --launch-skip 2 --launch-count 1 --metrics $M --csv"
for v in n0 n2; do
    [ $(el) -gt 430 ] && { stamp "ncu $v skipped (time)"; continue; }
    env ${VAR[$v]} timeout 35 $NCU -k 'regex:(ln|rms)_fwd_(words|onepass)_kernelILi2E' $N/apps/camel/camel bench \
        membound --mode cold --reps 20 --ops $OPS >$X/ncu_$v.csv 2>$X/ncu_$v.err
    echo "rc $?" >>$X/ncu_$v.err
    stamp "ncu $v"
done
# 5. the whole tests of new with the default (every forward of the other groups on the v2 kernels), alone on the
#    GPU, in the time left (at least 30 s)
left=$((550 - $(el))); [ $left -lt 30 ] && left=30; [ $left -gt 240 ] && left=240
for t in $TESTS; do
    (cd $N/tests && timeout $left ./$t >$X/${t}_whole_default.log 2>&1; echo "rc $?" >>$X/${t}_whole_default.log) &
done
wait
stamp "whole tests ($left s box)"
python3 "$S" $X >$X/summary.txt 2>&1
cat $X/stages.txt
cat $X/summary.txt
