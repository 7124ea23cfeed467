#!/usr/bin/env bash
# Session 20: the split-K count-in as one atom.add.acq_rel.gpu instead of __threadfence + atomicAdd +
# __threadfence (two MEMBAR.SC.GPU -> one MEMBAR.ALL.GPU). Binaries built locally (90a-real, stripped, xz) in
# build-s20x/: camel-new (48a6b24), camel-atom and test_gpu_gemm-atom (this change).
# Steps: test_gpu_gemm; racecheck / synccheck / memcheck of the split-K and forced-configuration tests; camel bench
# gemm bf16 + tf32 (GPT-2 set, squares 1024-4096) new / atom in turns, ROUNDS rounds. Summary last.
#   bash dev/gemm_sm90/run_s20_atom.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s20x; timeout_s 600)
set -u
T0=$(date +%s)
X=/tmp/x
rm -rf $X && mkdir -p $X /tmp/bin
stamp() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a $X/stages.txt; }
for f in build-s20x/*.xz; do n=$(basename $f .xz); python3 -c \
    "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $f /tmp/bin/$n && chmod +x /tmp/bin/$n; done
stamp "unpacked $(ls /tmp/bin | tr '\n' ' ')"
T=/tmp/bin/test_gpu_gemm-atom
(timeout 240 $T >$X/test.log 2>&1; echo "rc $?" >>$X/test.log) &
for tool in racecheck synccheck memcheck; do
    (for t in test_split_k test_sm90_configs; do
        CML_TEST_ONLY=$t CML_TEST_SANITIZER=1 timeout 250 compute-sanitizer --tool $tool --error-exitcode 99 \
            --report-api-errors no $T >$X/san_${tool}_$t.log 2>&1
        echo "rc $?" >>$X/san_${tool}_$t.log
    done) &
done
wait
for f in $X/san_*.log; do [ $(stat -c %s $f) -gt 100000 ] && { head -c 50000 $f >$f.cut; mv $f.cut $f; }; done
stamp "tests: $(for f in $X/test*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
grep -h "FAIL\|failed\|ERROR SUMMARY\|Hazard" $X/test*.log $X/san_*.log | sort | uniq -c | head -20 | tee -a $X/stages.txt
for r in $(seq 1 ${ROUNDS:-6}); do
    order="new atom"; [ $((r % 2)) = 0 ] && order="atom new"
    for v in $order; do
        timeout 120 /tmp/bin/camel-$v bench gemm --dtype bf16,tf32 --set gpt2,square --sizes 1024,2048,4096 \
            --reps 20 --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
python3 dev/gemm_sm90/s20_summary.py $X new atom >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
