#!/usr/bin/env bash
# Prepared in session 18 for the next session (not yet run): nbs_kernel with each row's dx right after its own row
# sums ("imm", patch dev/membound/s18_nbs_imm.patch: template IMM, CML_NORM_BWD_STAGED=imm, tests' mode 2) against
# today's order (dx one row behind), in one binary. Why: a stage is held from pass 1 until its dx; one row behind,
# that is two rows, so of the 3 stages one is in flight, and the kernel waits on its stage (ncu, session 18); KW 3
# with 4 stages ran 13% faster a CTA (run_s18_kw3.sh) but its 3-CTA clusters left 15 SMs idle. IMM holds a stage for
# pass 1 + the exchange + dx (< one row at 2-CTA clusters), two stages in flight, on all 132 SMs; the cost is the
# exchange's wait exposed (DSMEM, 2..16 CTAs). Steps: a copy of the tree with the patch; build; the norm tests whole,
# memcheck / racecheck / synccheck (CML_NORM_BWD_CLUSTER=8) of test_staged_rows; camel bench membound --ops
# layernorm_bwd,rmsnorm_bwd --mode both, base (unset) / imm in turns, 3 rounds; summary LAST.
# Decision (fixed now): keep (flip the default, keep the switch) if tests and sanitizers are clean, steady base/imm
# >= 1.03 at LayerNorm bf16 1024x32768 or 256x262144 and no shape below 0.99.
#   bash dev/membound/run_s19_imm.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x W=/tmp/w19i
root=$(pwd)
rm -rf $X $W && mkdir -p $X $W
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
(cd $W && git apply $root/dev/membound/s18_nbs_imm.patch) || { stamp "patch does not apply"; exit 1; }
B=$W/b
TESTS="test_gpu_layernorm test_gpu_rmsnorm"
cmake -S $W -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
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
    vs="base imm"; [ $r = 2 ] && vs="imm base"
    for v in $vs; do
        sw=""; [ $v = imm ] && sw="CML_NORM_BWD_STAGED=imm"
        env $sw timeout 100 $B/apps/camel/camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both \
            --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
python3 $root/dev/membound/ab_summary.py $X base >$X/summary.txt 2>&1
grep -h "FAIL\|failed" $X/test_*.log | head -10
cat $X/stages.txt $X/summary.txt
