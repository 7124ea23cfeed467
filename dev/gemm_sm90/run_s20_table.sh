#!/usr/bin/env bash
# Session 20: the re-tuned 16-bit table (run_s20_retune.sh merged by tuned_merge.py) against the table before, camel
# bench gemm bf16 + fp16 (GPT-2 set, squares 1024-4096) in turns, ROUNDS rounds. Binaries in build-s20x/ (built
# locally for 90a-real, stripped, xz): camel-head (5079259) and camel-table (the same code, the new table).
#   bash dev/gemm_sm90/run_s20_table.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s20x; timeout_s 600)
set -u
T0=$(date +%s)
X=/tmp/x
rm -rf $X && mkdir -p $X /tmp/bin
stamp() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a $X/stages.txt; }
for v in head table; do python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
    build-s20x/camel-$v.xz /tmp/bin/camel-$v && chmod +x /tmp/bin/camel-$v; done
for r in $(seq 1 ${ROUNDS:-8}); do
    order="head table"; [ $((r % 2)) = 0 ] && order="table head"
    for v in $order; do
        timeout 120 /tmp/bin/camel-$v bench gemm --dtype bf16,fp16 --set gpt2,square --sizes 1024,2048,4096 \
            --reps 20 --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
python3 dev/gemm_sm90/s20_summary.py $X head table >$X/summary.txt 2>&1
cat $X/summary.txt
