#!/usr/bin/env bash
# Session 17: the partial-sum kernel for few partial rows (nb_partial_sum4_kernel, norm_bwd_partial.cuh: nb <= 8,
# a thread 4 columns, all loads up front) against the 8-phase kernel (CML_NORM_BWD_PSUM4=0) in one binary: the two
# norm tests whole (their 256 x 262144, 131096 and 262144-column rows run it: dgamma / dbeta against float64, bitwise
# repeats), memcheck of test_staged_rows and test_longcluster_rows, then camel bench membound --ops
# layernorm_bwd,rmsnorm_bwd --mode both off / new in turns, 3 rounds; summary LAST.
#   bash dev/membound/run_s17_psum4.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=/tmp/b17p4
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
    for only in test_staged_rows test_longcluster_rows; do
        (cd $B/tests && CML_TEST_ONLY=$only CML_TEST_SANITIZER=1 timeout 200 compute-sanitizer --tool memcheck \
            --error-exitcode 99 --report-api-errors no ./$t >$X/memcheck_${t}_$only.log 2>&1
            echo "rc $?" >>$X/memcheck_${t}_$only.log) &
    done
done
wait
sed -i 's/^ok .*//' $X/test_*.log
stamp "tests: $(for f in $X/test_*.log $X/memcheck_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
for r in 1 2 3; do
    vs="off new"; [ $r = 2 ] && vs="new off"
    for v in $vs; do
        sw=""; [ $v = off ] && sw="CML_NORM_BWD_PSUM4=0"
        env $sw timeout 100 $B/apps/camel/camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both \
            --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
python3 $root/dev/membound/ab_summary.py $X off >$X/summary.txt 2>&1
grep -h "FAIL\|failed" $X/test_*.log | head -10
cat $X/stages.txt $X/summary.txt
