#!/usr/bin/env bash
# Session 17: where synccheck's "Barrier error detected. Missing wait" in nbc_kernel comes from (run_s17_final.sh
# found 27-34 of them, all at nbc_xchg::publish's arrive_expect_tx, all in f32 nbc launches, whose clusters are
# 9..16 CTAs; the 16-bit ones in those tests have <= 8). synccheck of test_cluster_rows with the default largest
# cluster (16) and with CML_NORM_BWD_CLUSTER=8 (portable sizes only: the f32 rows past 8 half chunks go to
# nbl_kernel), and of test_longcluster_rows (nbx_kernel: the same exchange in clusters of 9 and 16 CTAs, f32 and
# 16-bit).   bash dev/membound/run_s17_sync.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=/tmp/b17y
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a >$X/configure.log 2>&1
timeout 280 cmake --build $B -j16 --target test_gpu_layernorm >$X/build.log 2>&1
stamp "build rc $?"
san() { # name, env..., test
    local n=$1; shift
    (cd $B/tests && env CML_TEST_SANITIZER=1 "$@" timeout 250 compute-sanitizer --tool synccheck --error-exitcode 99 \
        --report-api-errors no ./test_gpu_layernorm >$X/$n.log 2>&1; echo "rc $?" >>$X/$n.log) &
}
san cluster16 CML_TEST_ONLY=test_cluster_rows
san cluster8 CML_TEST_ONLY=test_cluster_rows CML_NORM_BWD_CLUSTER=8
san longcluster CML_TEST_ONLY=test_longcluster_rows
wait
for f in $X/cluster16.log $X/cluster8.log $X/longcluster.log; do
    echo "== $(basename $f): $(tail -1 $f), $(grep -h 'ERROR SUMMARY' $f)"
    grep -h "Device Frame" $f | sed 's/+0x[0-9a-f]*//' | grep kernel | sort | uniq -c | sort -rn | head -5
    grep -h "passed\|FAIL" $f | head -3
    [ $(stat -c %s $f) -gt 100000 ] && { head -c 50000 $f >$f.cut; mv $f.cut $f; }
done
cat $X/stages.txt
