#!/usr/bin/env bash
# Session 18: nbs_kernel with its stage refilled right after pass 1 and dx (one row behind) reading the row's words
# again from L2 ("early": two of the 3 stages in flight instead of one) against session 17's order
# (CML_NORM_BWD_STAGED=late) in one binary: the norm tests whole, memcheck / racecheck / synccheck of
# test_staged_rows (synccheck with CML_NORM_BWD_CLUSTER=8), camel bench membound --ops layernorm_bwd,rmsnorm_bwd
# --mode both late / new in turns, 3 rounds; summary LAST.
# Decision (fixed before the run): keep if tests and sanitizers are clean, steady late/new >= 1.02 at LayerNorm bf16
# 1024x32768 or 256x262144 and no shape below 0.99.
#   bash dev/membound/run_s18_early.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=/tmp/b18e
root=$(pwd)
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
TESTS="test_gpu_layernorm test_gpu_rmsnorm"
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    >$X/configure.log 2>&1
timeout 280 cmake --build $B -j16 --target camel $TESTS >$X/build.log 2>&1
stamp "build rc $?"
for t in $TESTS; do
    (cd $B/tests && timeout 200 ./$t >$X/test_$t.log 2>&1; echo "rc $?" >>$X/test_$t.log) &
    for tool in memcheck racecheck synccheck; do
        cap=""; [ $tool = synccheck ] && cap="CML_NORM_BWD_CLUSTER=8"
        (cd $B/tests && env $cap CML_TEST_ONLY=test_staged_rows CML_TEST_SANITIZER=1 timeout 200 compute-sanitizer \
            --tool $tool --error-exitcode 99 --report-api-errors no ./$t >$X/san_${tool}_$t.log 2>&1
            echo "rc $?" >>$X/san_${tool}_$t.log) &
    done
done
wait
sed -i 's/^ok .*//' $X/test_*.log
for f in $X/san_*.log; do [ $(stat -c %s $f) -gt 100000 ] && { head -c 50000 $f >$f.cut; mv $f.cut $f; }; done
stamp "tests: $(for f in $X/test_*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
for r in 1 2 3; do
    vs="late new"; [ $r = 2 ] && vs="new late"
    for v in $vs; do
        sw=""; [ $v = late ] && sw="CML_NORM_BWD_STAGED=late"
        env $sw timeout 100 $B/apps/camel/camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both \
            --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
python3 $root/dev/membound/ab_summary.py $X late >$X/summary.txt 2>&1
grep -h "FAIL\|failed" $X/test_*.log | head -10
cat $X/stages.txt $X/summary.txt
