#!/usr/bin/env bash
# Session 18: the staged norm backward (nbs_kernel) in a KW 3 form with a 4-stage ring (chunks of 12288 columns,
# 48 KB stages: two rows' copies in flight instead of one) for 16-bit rows of 16384 < C <= 16 x 12288, against
# session 17's KW 4 form with 3 stages (CML_NORM_BWD_STAGED=kw4), in one binary: the two norm tests whole,
# memcheck / racecheck / synccheck of their test_staged_rows (both forms), ncu launch sizes of nbs (the plans:
# grid = clusters x CTAs), camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both kw4 / new in turns,
# 3 rounds; summary LAST.
# Decision (fixed before the run): keep if tests and sanitizers are clean, steady kw4/new >= 1.02 at LayerNorm bf16
# 1024x32768 and no shape below 0.99.
#   bash dev/membound/run_s18_kw3.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=/tmp/b18k
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
        (cd $B/tests && CML_TEST_ONLY=test_staged_rows CML_TEST_SANITIZER=1 timeout 250 compute-sanitizer --tool $tool \
            --error-exitcode 99 --report-api-errors no ./$t >$X/san_${tool}_$t.log 2>&1
            echo "rc $?" >>$X/san_${tool}_$t.log) &
    done
done
wait
sed -i 's/^ok .*//' $X/test_*.log
for f in $X/san_*.log; do [ $(stat -c %s $f) -gt 100000 ] && { head -c 50000 $f >$f.cut; mv $f.cut $f; }; done
stamp "tests: $(for f in $X/test_*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
for v in kw4 new; do
    sw=""; [ $v = kw4 ] && sw="CML_NORM_BWD_STAGED=kw4"
    env $sw timeout 60 ncu --kernel-name-base function -k regex:nbs_kernel --filter-mode per-launch-config \
        --launch-count 4 --metrics launch__grid_size,gpu__time_duration.sum --csv \
        $B/apps/camel/camel bench membound --mode cold --reps 20 --ops layernorm_bwd >$X/ncu_$v.csv 2>&1
done
stamp "ncu plans done"
for r in 1 2 3; do
    vs="kw4 new"; [ $r = 2 ] && vs="new kw4"
    for v in $vs; do
        sw=""; [ $v = kw4 ] && sw="CML_NORM_BWD_STAGED=kw4"
        env $sw timeout 100 $B/apps/camel/camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both \
            --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
python3 $root/dev/membound/ab_summary.py $X kw4 >$X/summary.txt 2>&1
grep -h "FAIL\|failed" $X/test_*.log | head -10
grep -h 'launch__grid_size' $X/ncu_*.csv | cut -c1-220 | head -20
cat $X/stages.txt $X/summary.txt
