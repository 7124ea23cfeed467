#!/usr/bin/env bash
# Session 17, ONE device call: the final form of the staged norm backward (then a patch, now in the tree:
# nbs_kernel for 16-bit rows of 2..16 chunks of 16384 columns, on by default) checked and measured before it lands:
# 1. a copy of the tree with the patch; the whole build; ctest -L gpu (every GPU test: the norm tests' nbc / nbl /
#    nbx cases now force nbs off, test_staged_rows covers nbs);
# 2. memcheck / racecheck / synccheck of test_staged_rows (both norms), and synccheck of test_cluster_rows
#    (layernorm: nbc_kernel, unchanged by the patch; its synccheck report in the run before was the question);
# 3. camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both, CML_NORM_BWD_STAGED=0 (the kernels before) /
#    unset (the new default) in turns, ROUNDS rounds; summary (ab_summary.py, base = off) LAST.
#   bash dev/membound/run_s17_final.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (timeout_s 600; LIMIT 540 inside)
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-540}
ROUNDS=${ROUNDS:-3}
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x W=/tmp/w17f
root=$(pwd)
rm -rf $X $W && mkdir -p $X $W
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
if grep -q nbs_kernel $W/src/kernels/cuda/norm/layernorm_bwd.cu 2>/dev/null; then
    stamp "tree already has nbs_kernel"
else
    (cd $W && git apply $root/dev/membound/s17_staged.patch) || { stamp "patch does not apply"; exit 1; }
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$X/gpu.txt 2>&1
cmake -S $W -B $W/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    >$X/configure.log 2>&1
timeout 300 cmake --build $W/b -j16 >$W/build.log 2>&1
rc=$?
tail -c 60000 $W/build.log >$X/build.log
stamp "build rc $rc; warnings: $(grep -c 'warning' $W/build.log)"
[ $rc = 0 ] || { grep -E 'error' $W/build.log | head -20; exit 1; }
N=$W/b
(cd $N && timeout 260 ctest -L gpu -j4 --output-on-failure >$X/ctest.log 2>&1; echo "rc $?" >>$X/ctest.log) &
for t in test_gpu_layernorm test_gpu_rmsnorm; do
    for tool in memcheck racecheck synccheck; do
        (cd $N/tests && CML_TEST_ONLY=test_staged_rows CML_TEST_SANITIZER=1 timeout 250 compute-sanitizer --tool $tool \
            --error-exitcode 99 --report-api-errors no ./$t >$X/san_${tool}_$t.log 2>&1
            echo "rc $?" >>$X/san_${tool}_$t.log) &
    done
done
(cd $N/tests && CML_TEST_ONLY=test_cluster_rows CML_TEST_SANITIZER=1 timeout 250 compute-sanitizer --tool synccheck \
    --error-exitcode 99 --report-api-errors no ./test_gpu_layernorm >$X/san_synccheck_cluster_rows.log 2>&1
    echo "rc $?" >>$X/san_synccheck_cluster_rows.log) &
wait
for f in $X/san_*.log $X/ctest.log; do [ $(stat -c %s $f) -gt 200000 ] && { head -c 100000 $f >$f.cut; mv $f.cut $f; }; done
stamp "ctest: $(grep -E 'tests passed|tests failed' $X/ctest.log | tail -1) ($(tail -1 $X/ctest.log))"
stamp "sanitizers: $(for f in $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
last=0
for r in $(seq 1 $ROUNDS); do
    [ $(($(el) + last + 10)) -gt $LIMIT ] && { stamp "round $r skipped (a round took $last s)"; break; }
    rs=$(el)
    vs="off new"; [ $((r % 2)) = 0 ] && vs="new off"
    for v in $vs; do
        sw=""; [ $v = off ] && sw="CML_NORM_BWD_STAGED=0"
        env $sw timeout 100 $N/apps/camel/camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both \
            --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
    last=$(($(el) - rs))
done
python3 $root/dev/membound/ab_summary.py $X off >$X/summary.txt 2>&1
grep -E "FAIL|Failed|\*\*\*" $X/ctest.log | head -20
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $X/san_*.log
cat $X/stages.txt $X/summary.txt
