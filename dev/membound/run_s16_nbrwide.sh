#!/usr/bin/env bash
# Session 15 (helper h15a; README "Session 15 (helper h15a)"), ONE device call: the LayerNorm / RMSNorm backward over
# 16-byte aligned rows of 257..1024 words in nbw_kernel (norm_bwd_wide.cuh: row groups of 256 threads with 2 words a
# thread, the next row staged by cp.async; patch dev/membound/s16_nbrwide.patch, src + tests; CML_NORM_BWD_WIDE=0 =
# the dispatch before it, =all / =k4 the wider ranges and the 4-word form).
# Run from the repository root of the lead's tree (timeout_s 600; the script stays under LIMIT = 470 s):
#   bash dev/membound/run_s16_nbrwide.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# 1. ab_trees (dev/ab_lib.sh): $W = new (the patch applied, or the tree as is when it has it), $BASE = base (the
#    patch reverted there); both built at once (cmake -G Ninja Release, 90a, -Werror; base niced): new: camel +
#    test_gpu_layernorm + test_gpu_rmsnorm; base: camel; beside them ptxas -v of the two .cu files of new (nbw lines);
# 2. at once, in a box of TT (170) s: the two tests whole (new, defaults), compute-sanitizer memcheck + racecheck of
#    test_wide_rows alone in each (CML_TEST_ONLY, CML_TEST_SANITIZER=1: the small shapes, capped blocks);
# 3. camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode $MODE (both) base / new / off / all / k4 in turns
#    (off = CML_NORM_BWD_WIDE=0, all = =all, k4 = =k4), the order rotating, ROUNDS (3) rounds as time allows;
# 4. the summary (dev/membound/s16_nbrwide_summary.py, by time) printed LAST.
# Locally (no GPU): DRY=1 W=/tmp/h15a/w BASE=/tmp/h15a/b X=/tmp/h15a/x bash dev/membound/run_s16_nbrwide.sh checks
# the patch against copies of this tree and runs the summary on made-up logs; nothing is built or run.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-470}
ROUNDS=${ROUNDS:-3}
TT=${TT:-170}
MODE=${MODE:-both}
DRY=${DRY:-0}
el() { echo $(($(date +%s) - T0)); }
X=${X:-/tmp/x}
W=${W:-/tmp/w16w}
BASE=${BASE:-/tmp/b16w}
root=$(pwd)
P=$root/dev/membound/s16_nbrwide.patch
S=$root/dev/membound/s16_nbrwide_summary.py
TESTS="test_gpu_layernorm test_gpu_rmsnorm"
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
. dev/ab_lib.sh
ab_trees $W $BASE $P >$X/trees.txt 2>&1 || { cat $X/trees.txt; exit 1; }
stamp "trees: $(tr '\n' ' ' <$X/trees.txt)"
echo "norm_bwd_wide.cuh in new: $(ls $W/src/kernels/cuda/norm/norm_bwd_wide.cuh 2>/dev/null || echo MISSING), in base: $(ls $BASE/src/kernels/cuda/norm/norm_bwd_wide.cuh 2>/dev/null || echo absent)" >>$X/trees.txt

if [ "$DRY" = 1 ]; then
    python3 "$S" --fake $X
    python3 "$S" $X >$X/summary.txt 2>&1
    cat $X/trees.txt $X/stages.txt $X/summary.txt
    exit 0
fi

# 1. builds (+ ptxas -v of the two files of new, nbw lines only)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$X/gpu.txt 2>&1
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B $W/b $CM >$W/configure.log 2>&1 &&
    timeout 300 cmake --build $W/b -j16 --target camel $TESTS >$W/build.log 2>&1
    echo "rc $?" >>$W/build.log) &
(cmake -S $BASE -B $BASE/b $CM >$BASE/configure.log 2>&1 &&
    timeout 300 nice -n 10 cmake --build $BASE/b -j16 --target camel >$BASE/build.log 2>&1
    echo "rc $?" >>$BASE/build.log) &
(cd $W && for f in layernorm_bwd rmsnorm_bwd; do
    $NVCC -DCML_HAVE_CUDA=1 -Isrc -Iinclude -O3 -DNDEBUG --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] \
        -Xptxas=-v -x cu -c src/kernels/cuda/norm/$f.cu -o /tmp/ptxas_$f.o 2>&1 | grep -A2 "nbw_kernel" | grep -v "^--"
done >$X/ptxas_nbw.txt 2>&1) &
wait
for b in $W $BASE; do tail -c 200000 $b/build.log >$X/build_$(basename $b).log; done
stamp "built: new $(tail -1 $W/build.log), base $(tail -1 $BASE/build.log); warnings (new): $(grep -c 'warning' $W/build.log)"
for b in $W $BASE; do
    [ "$(tail -1 $b/build.log)" = "rc 0" ] || { stamp "$b build failed"; grep -E 'error' $b/build.log | head -20; exit 1; }
done
N=$W/b
O=$BASE/b

# 2. tests and sanitizers, at once, boxed
for t in $TESTS; do
    (cd $N/tests && timeout $TT ./$t >$X/test_$t.log 2>&1; echo "rc $?" >>$X/test_$t.log) &
    for tool in memcheck racecheck; do
        (cd $N/tests && CML_TEST_ONLY=test_wide_rows CML_TEST_SANITIZER=1 timeout $TT compute-sanitizer \
            --tool $tool --error-exitcode 99 --report-api-errors no ./$t >$X/san_${tool}_$t.log 2>&1
            echo "rc $?" >>$X/san_${tool}_$t.log) &
    done
done
wait
for f in $X/test_*.log $X/san_*.log; do # keep /tmp/x small
    [ $(stat -c %s $f) -gt 400000 ] && { head -c 100000 $f >$f.cut; echo; tail -c 100000 $f >>$f.cut; mv $f.cut $f; }
done
sed -i 's/^ok .*//' $X/test_*.log 2>/dev/null
stamp "tests and sanitizers done (box $TT s): $(for f in $X/test_*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"

# 3. benches in turns, the order rotating; a round only when the last one's time fits before LIMIT - 15
declare -A BIN=([base]=$O/apps/camel/camel [new]=$N/apps/camel/camel [off]=$N/apps/camel/camel
    [all]=$N/apps/camel/camel [k4]=$N/apps/camel/camel)
declare -A ENVS=([base]="" [new]="" [off]="CML_NORM_BWD_WIDE=0" [all]="CML_NORM_BWD_WIDE=all" [k4]="CML_NORM_BWD_WIDE=k4")
ORDERS=("base new off all k4" "k4 all off new base" "new base k4 off all")
last=0
for r in $(seq 1 $ROUNDS); do
    [ $(($(el) + last + 15)) -gt $LIMIT ] && { stamp "bench round $r skipped (time: a round took $last s)"; break; }
    rs=$(el)
    for v in ${ORDERS[$(((r - 1) % 3))]}; do
        env ${ENVS[$v]} timeout 100 ${BIN[$v]} bench membound --ops layernorm_bwd,rmsnorm_bwd --mode $MODE \
            --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        echo "rc $?" >>$X/bench_${v}_$r.txt
        stamp "bench $v round $r ($(tail -1 $X/bench_${v}_$r.txt))"
    done
    last=$(($(el) - rs))
done

# 4. summary
python3 "$S" $X >$X/summary.txt 2>&1
cat $X/trees.txt
cat $X/ptxas_nbw.txt
cat $X/stages.txt
cat $X/summary.txt
