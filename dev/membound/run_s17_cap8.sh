#!/usr/bin/env bash
# Session 17: what capping nbc_kernel's clusters at 8 CTAs (CML_NORM_BWD_CLUSTER=8: f32 rows of 9..16 half chunks
# to nbl_kernel) costs, and whether the norm suites are then synccheck-clean (run_s17_sync.sh: the "Missing wait"
# reports come only from nbc's 9..16-CTA clusters). camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
# default / cap8 in turns, 3 rounds; synccheck of the whole test_gpu_layernorm and test_gpu_rmsnorm under cap8.
#   bash dev/membound/run_s17_cap8.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=/tmp/b17c
root=$(pwd)
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a >$X/configure.log 2>&1
timeout 280 cmake --build $B -j16 --target camel test_gpu_layernorm test_gpu_rmsnorm >$X/build.log 2>&1
stamp "build rc $?"
for t in test_gpu_layernorm test_gpu_rmsnorm; do
    (cd $B/tests && CML_NORM_BWD_CLUSTER=8 CML_TEST_SANITIZER=1 timeout 300 compute-sanitizer --tool synccheck \
        --error-exitcode 99 --report-api-errors no ./$t >$X/sync_$t.log 2>&1; echo "rc $?" >>$X/sync_$t.log) &
done
wait
stamp "synccheck (cap8): $(for t in test_gpu_layernorm test_gpu_rmsnorm; do echo -n "$t $(tail -1 $X/sync_$t.log), $(grep -h 'ERROR SUMMARY' $X/sync_$t.log); "; done)"
for r in 1 2 3; do
    vs="default cap8"; [ $r = 2 ] && vs="cap8 default"
    for v in $vs; do
        sw=""; [ $v = cap8 ] && sw="CML_NORM_BWD_CLUSTER=8"
        env $sw timeout 100 $B/apps/camel/camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both \
            --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
for f in $X/sync_*.log; do [ $(stat -c %s $f) -gt 100000 ] && { head -c 50000 $f >$f.cut; mv $f.cut $f; }; done
python3 $root/dev/membound/ab_summary.py $X default >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
