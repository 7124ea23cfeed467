#!/usr/bin/env bash
# Session 18: the 8-phase partial sum (nb_partial_sum_kernel, norm_bwd_partial.cuh) with a phase's rows loaded up
# front (MAXR 8 / 17 / 34) against the loop of four rows in flight (CML_NORM_BWD_UPFRONT=0), in one binary: the two
# norm tests whole, memcheck of their test_shapes, output fingerprints (dev/membound/norm_bits.c) with the switch
# off and on (the same sums in the same order: must be bitwise equal), camel bench membound --ops
# layernorm_bwd,rmsnorm_bwd --mode both off / new in turns, 3 rounds; summary LAST.
# ncu before (dev/membound/run_s18_times.sh): the partial sum took 5-6 us at every shape (a quarter of LayerNorm
# bf16 4096x1024, 14% of 4096x4096).
#   bash dev/membound/run_s18_psum.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x W=/tmp/w18p
root=$(pwd)
rm -rf $X $W && mkdir -p $X $W
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
cp dev/membound/norm_bits.c $W/tests/gpu/zz_norm_bits.c
B=$W/b
TESTS="test_gpu_layernorm test_gpu_rmsnorm"
cmake -S $W -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    >$X/configure.log 2>&1
timeout 280 cmake --build $B -j16 --target camel $TESTS >$X/build.log 2>&1
stamp "build rc $?"
timeout 100 cmake --build $B -j16 --target zz_norm_bits >$X/build_bits.log 2>&1
stamp "norm_bits build rc $?"
for t in $TESTS; do
    (cd $B/tests && timeout 200 ./$t >$X/test_$t.log 2>&1; echo "rc $?" >>$X/test_$t.log) &
    (cd $B/tests && CML_TEST_ONLY=test_shapes CML_TEST_SANITIZER=1 timeout 200 compute-sanitizer --tool memcheck \
        --error-exitcode 99 --report-api-errors no ./$t >$X/memcheck_$t.log 2>&1
        echo "rc $?" >>$X/memcheck_$t.log) &
done
if [ -x $B/tests/zz_norm_bits ]; then
    (cd $B/tests && CML_NORM_BWD_UPFRONT=0 timeout 150 ./zz_norm_bits >$X/bits_off.txt 2>&1; echo "rc $?" >>$X/bits_off.txt
        timeout 150 ./zz_norm_bits >$X/bits_new.txt 2>&1; echo "rc $?" >>$X/bits_new.txt) &
fi
wait
sed -i 's/^ok .*//' $X/test_*.log
stamp "tests: $(for f in $X/test_*.log $X/memcheck_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
[ -f $X/bits_new.txt ] && stamp "fingerprints off vs new: $(diff $X/bits_off.txt $X/bits_new.txt | grep -c '^<') of $(grep -c . $X/bits_off.txt) lines differ; repeats differing: $(grep -c REPEAT-DIFFERS $X/bits_new.txt)"
for r in 1 2 3; do
    vs="off new"; [ $r = 2 ] && vs="new off"
    for v in $vs; do
        sw=""; [ $v = off ] && sw="CML_NORM_BWD_UPFRONT=0"
        env $sw timeout 100 $B/apps/camel/camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both \
            --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
python3 $root/dev/membound/ab_summary.py $X off >$X/summary.txt 2>&1
grep -h "FAIL\|failed" $X/test_*.log | head -10
cat $X/stages.txt $X/summary.txt
