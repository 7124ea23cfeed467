#!/usr/bin/env bash
# Session 20: the cluster kernels without release barriers -- the start's cluster barrier relaxed (the mbarrier
# init fence publishes the inits) and the end's replaced by the producer waiting for the last fill of every stage
# to be freed (as CUTLASS's producer tail). cluster_launch_probe.cu measured each release barrier at ~0.7 us a
# launch. Binaries built locally for 90a-real, stripped and xz-compressed into build-s20x/ (carried): camel-old (the
# parent commit, 4bf5bfe: a git worktree), camel-new and test_gpu_gemm-new (this commit).
# Steps: test_gpu_gemm; compute-sanitizer racecheck / synccheck / memcheck of the forced configurations (c2
# included) and the TMA epilogues; camel tune gemm with old and new (every configuration's time: c2 / c1 per tile);
# camel bench gemm bf16 old / new in turns, ROUNDS rounds. Summary last.
#   bash dev/gemm_sm90/run_s20_relaxed.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s20x; timeout_s 600)
set -u
T0=$(date +%s)
X=/tmp/x
rm -rf $X && mkdir -p $X /tmp/bin
stamp() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a $X/stages.txt; }
for f in build-s20x/*.xz; do n=$(basename $f .xz); python3 -c \
    "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $f /tmp/bin/$n && chmod +x /tmp/bin/$n; done
stamp "unpacked $(ls /tmp/bin | tr '\n' ' ')"
T=/tmp/bin/test_gpu_gemm-new
(timeout 240 $T >$X/test.log 2>&1; echo "rc $?" >>$X/test.log) &
for tool in racecheck synccheck memcheck; do
    (CML_TEST_ONLY=test_sm90_configs CML_TEST_SANITIZER=1 timeout 280 compute-sanitizer --tool $tool \
        --error-exitcode 99 --report-api-errors no $T >$X/san_${tool}_configs.log 2>&1
     echo "rc $?" >>$X/san_${tool}_configs.log
     CML_TEST_ONLY=test_tma_epilogues CML_TEST_SANITIZER=1 timeout 200 compute-sanitizer --tool $tool \
        --error-exitcode 99 --report-api-errors no $T >$X/san_${tool}_tmaepi.log 2>&1
     echo "rc $?" >>$X/san_${tool}_tmaepi.log) &
done
wait
for f in $X/san_*.log; do [ $(stat -c %s $f) -gt 100000 ] && { head -c 50000 $f >$f.cut; mv $f.cut $f; }; done
stamp "tests: $(for f in $X/test*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
grep -h "FAIL\|failed\|ERROR SUMMARY\|Hazard" $X/test*.log $X/san_*.log | sort | uniq -c | head -20 | tee -a $X/stages.txt
for v in old new; do
    timeout 170 /tmp/bin/camel-$v tune gemm --dtype bf16 --set gpt2,square --sizes 2048,4096 --ops NN \
        --json $X/tune_$v.json --out $X/tuned_$v.inc >$X/tune_$v.txt 2>&1
    stamp "tune $v rc $?"
done
for r in $(seq 1 ${ROUNDS:-6}); do
    order="old new"; [ $((r % 2)) = 0 ] && order="new old"
    for v in $order; do
        timeout 120 /tmp/bin/camel-$v bench gemm --dtype bf16 --set gpt2,square --sizes 1024,2048,4096,8192 \
            --reps 20 --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
python3 dev/gemm_sm90/s20_tune_c2.py $X old new >$X/tune_summary.txt 2>&1
python3 dev/gemm_sm90/s20_summary.py $X old new >$X/summary.txt 2>&1
cat $X/stages.txt $X/tune_summary.txt $X/summary.txt
