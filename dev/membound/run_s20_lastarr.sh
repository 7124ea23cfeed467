#!/usr/bin/env bash
# Session 20: cml__block_arrives_last (common/last_arrival.cuh: the flat / split sums, the split cross-entropy
# forward) and the fp8 conversion's amax merge take their ticket with one atom.add.acq_rel.gpu instead of
# atom.add.release.gpu + (in the last block) fence.acq_rel.gpu, whose MEMBAR.ALL.GPU cost ~0.7 us on the kernel's
# critical path in dev/gemm_sm90/cluster_launch_probe.cu. Binaries built locally (90a-real, stripped, xz) in
# build-s20x/: camel-head (5079259, the code before) and camel-la plus the test programs (this change).
# Steps: test_gpu_reduce / softmax / convert; memcheck / racecheck / synccheck of test_gpu_reduce and
# test_gpu_convert; camel bench membound --ops sum,cross_entropy,convert_scaled_e4m3_amax --mode both, head / la in
# turns, ROUNDS rounds; dev/membound/ab_summary.py last.
#   bash dev/membound/run_s20_lastarr.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s20x; timeout_s 600)
set -u
T0=$(date +%s)
X=/tmp/x
rm -rf $X && mkdir -p $X /tmp/bin
stamp() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a $X/stages.txt; }
for f in build-s20x/*.xz; do n=$(basename $f .xz); python3 -c \
    "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $f /tmp/bin/$n && chmod +x /tmp/bin/$n; done
stamp "unpacked $(ls /tmp/bin | tr '\n' ' ')"
for t in reduce softmax convert; do
    (timeout 200 /tmp/bin/test_gpu_$t >$X/test_$t.log 2>&1; echo "rc $?" >>$X/test_$t.log) &
done
wait
for t in reduce convert; do
    for tool in memcheck racecheck synccheck; do
        (CML_TEST_SANITIZER=1 timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 --report-api-errors no \
            /tmp/bin/test_gpu_$t >$X/san_${tool}_$t.log 2>&1; echo "rc $?" >>$X/san_${tool}_$t.log) &
    done
done
wait
for f in $X/san_*.log; do [ $(stat -c %s $f) -gt 100000 ] && { head -c 50000 $f >$f.cut; mv $f.cut $f; }; done
stamp "tests: $(for f in $X/test_*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
grep -h "FAIL\|failed\|ERROR SUMMARY\|Hazard" $X/test_*.log $X/san_*.log | sort | uniq -c | head -20 | tee -a $X/stages.txt
for r in $(seq 1 ${ROUNDS:-3}); do
    order="head la"; [ $((r % 2)) = 0 ] && order="la head"
    for v in $order; do
        timeout 150 /tmp/bin/camel-$v bench membound --ops sum,cross_entropy,convert_scaled_e4m3_amax --mode both \
            --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
python3 dev/membound/ab_summary.py $X head >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
