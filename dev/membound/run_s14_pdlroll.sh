#!/usr/bin/env bash
# Session 14 (helper h14a; README "Session 14 (helper h14a)"), ONE device call: programmatic dependent launch in
# every memory-bound kernel (patch dev/membound/s14_pdlroll.patch: cml__launch in common/launch.cuh, every kernel of
# ewise / reduce / softmax / norm / optim / index starting with cml__pdl_entry, CML_PDL=0 = the old plain launches).
# Run from the repository root of the lead's tree (timeout_s 600; the script stays under LIMIT = 540 s):
#   bash dev/membound/run_s14_pdlroll.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# 1. ab_trees (dev/ab_lib.sh): $W = new (the patch applied, or the tree as is when it has it), $BASE = base (the
#    patch reverted there); both built at once (cmake -G Ninja Release, 90a, -Werror; base niced): new: camel and
#    the GPU tests of the touched ops + test_gpu_pdl_chain; base: camel;
# 2. at once, in a box of TT (150) s: test_gpu_pdl_chain (default and CML_PDL=0: it forces PDL on / off itself and
#    compares every output bitwise with a synced PDL-off run), compute-sanitizer memcheck + racecheck of it
#    (CML_TEST_SANITIZER=1: the small shapes), and the whole GPU tests of the touched ops (new, PDL on by default);
# 3. camel bench membound (all ops, steady + cold, --json) base / new / pdl0 (new with CML_PDL=0) in turns, the
#    order rotating, ROUNDS (2) rounds as time allows;
# 4. the summary (dev/membound/s14_pdlroll_summary.py) printed LAST (every point in /tmp/x/points.txt).
# Locally (no GPU): DRY=1 W=/tmp/h14a/w BASE=/tmp/h14a/b X=/tmp/h14a/x bash dev/membound/run_s14_pdlroll.sh checks
# the patch against copies of this tree and runs the summary on made-up logs; nothing is built or run.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-540}
ROUNDS=${ROUNDS:-2}
TT=${TT:-150}
DRY=${DRY:-0}
el() { echo $(($(date +%s) - T0)); }
X=${X:-/tmp/x}
W=${W:-/tmp/w14a}
BASE=${BASE:-/tmp/b14a}
root=$(pwd)
P=$root/dev/membound/s14_pdlroll.patch
S=$root/dev/membound/s14_pdlroll_summary.py
TESTS="test_gpu_reduce test_gpu_softmax test_gpu_layernorm test_gpu_rmsnorm test_gpu_convert test_gpu_ewise
 test_gpu_optim test_gpu_embedding test_gpu_batchnorm test_gpu_pool"
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
. dev/ab_lib.sh
ab_trees $W $BASE $P >$X/trees.txt 2>&1 || { cat $X/trees.txt; exit 1; }
stamp "trees: $(tr '\n' ' ' <$X/trees.txt)"
grep -c cml__pdl_entry $W/src/kernels/cuda/softmax/softmax.cu $BASE/src/kernels/cuda/softmax/softmax.cu \
    2>/dev/null | tr '\n' ' ' | sed 's/^/cml__pdl_entry in softmax.cu (new, base): /' >>$X/trees.txt

if [ "$DRY" = 1 ]; then
    python3 "$S" --fake $X
    python3 "$S" $X >$X/summary.txt 2>&1
    cat $X/trees.txt $X/stages.txt $X/summary.txt
    exit 0
fi

# 1. builds
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$X/gpu.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B $W/b $CM >$X/configure_new.log 2>&1 &&
    timeout 330 cmake --build $W/b -j16 --target camel test_gpu_pdl_chain $TESTS >$X/build_new.log 2>&1
    echo "rc $?" >>$X/build_new.log) &
(cmake -S $BASE -B $BASE/b $CM >$X/configure_base.log 2>&1 &&
    timeout 330 nice -n 10 cmake --build $BASE/b -j16 --target camel >$X/build_base.log 2>&1
    echo "rc $?" >>$X/build_base.log) &
wait
stamp "built: new $(tail -1 $X/build_new.log), base $(tail -1 $X/build_base.log); warnings (new): $(grep -c 'warning' $X/build_new.log)"
for b in new base; do
    [ "$(tail -1 $X/build_$b.log)" = "rc 0" ] || { stamp "$b build failed"; grep -E 'error' $X/build_$b.log | head -20; exit 1; }
done
N=$W/b
O=$BASE/b

# 2. tests and sanitizers, at once, boxed
tt=$TT
(cd $N/tests && timeout $tt ./test_gpu_pdl_chain >$X/test_gpu_pdl_chain_default.log 2>&1
    echo "rc $?" >>$X/test_gpu_pdl_chain_default.log) &
(cd $N/tests && CML_PDL=0 timeout $tt ./test_gpu_pdl_chain >$X/test_gpu_pdl_chain_pdl0.log 2>&1
    echo "rc $?" >>$X/test_gpu_pdl_chain_pdl0.log) &
for tool in memcheck racecheck; do
    (cd $N/tests && CML_TEST_SANITIZER=1 timeout $tt compute-sanitizer --tool $tool --error-exitcode 99 \
        --report-api-errors no ./test_gpu_pdl_chain >$X/san_${tool}_chain.log 2>&1
        echo "rc $?" >>$X/san_${tool}_chain.log) &
done
for t in $TESTS; do
    (cd $N/tests && timeout $tt ./$t >$X/$t.log 2>&1; echo "rc $?" >>$X/$t.log) &
done
wait
stamp "tests and sanitizers done (box $tt s): $(for f in $X/test_*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"

# 3. benches in turns, the order rotating; a round only when the last one's time fits before LIMIT - 20
declare -A BIN=([base]=$O/apps/camel/camel [new]=$N/apps/camel/camel [pdl0]=$N/apps/camel/camel)
declare -A ENVS=([base]="" [new]="" [pdl0]="CML_PDL=0")
ORDERS=("base new pdl0" "pdl0 new base" "new base pdl0")
last=0
for r in $(seq 1 $ROUNDS); do
    [ $(($(el) + last + 20)) -gt $LIMIT ] && { stamp "bench round $r skipped (time: a round took $last s)"; break; }
    rs=$(el)
    for v in ${ORDERS[$(((r - 1) % 3))]}; do
        env ${ENVS[$v]} timeout 150 ${BIN[$v]} bench membound --json $X/bench_${v}_$r.json --commit $v \
            >$X/bench_${v}_$r.txt 2>&1
        echo "rc $?" >>$X/bench_${v}_$r.txt
        stamp "bench $v round $r ($(tail -1 $X/bench_${v}_$r.txt))"
    done
    last=$(($(el) - rs))
done

# 4. summary
python3 "$S" $X >$X/summary.txt 2>&1
cat $X/trees.txt
cat $X/stages.txt
cat $X/summary.txt
