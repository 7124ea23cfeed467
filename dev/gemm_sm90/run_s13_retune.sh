#!/bin/bash
# Session 13: re-tune the sm90 GEMM table for tf32 (its epilogue now stores f32 D through TMA, so the plans tuned
# under the synchronous stores may no longer be the best) and bf16 (tuned in session 4-7, before the epilogue
# diet), and measure the re-tuned table against today's in turns. ONE device call from the tree root:
#   bash dev/gemm_sm90/run_s13_retune.sh; tar czf $OUT/logs.tgz -C /tmp/x .          (timeout_s 600)
# 1. builds camel + test_gpu_gemm from a copy of this tree (/tmp/rt, no .git), keeps the binary as base;
# 2. camel tune gemm --dtype $DTYPES --set square,gpt2 --sizes 2048,4096,8192 --ops NN,NT (table + JSON in /tmp/x);
# 3. tuned_merge.py: the tuned cases' rows from the run, every other row kept -> the copy's table; rebuilds
#    (gemm_sm90.cu only) and runs test_gpu_gemm with the new table;
# 4. camel bench gemm on the same cases, base / new in turns, ROUNDS rounds as time allows; bench_ab.py summary LAST.
# Keep the new table (copy /tmp/x/merged.inc over src/kernels/cuda/gemm/gemm_sm90_tuned.inc) if no case loses
# more than 1% (geomean of rounds) and the geomeans gain.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-560}
ROUNDS=${ROUNDS:-3}
DTYPES=${DTYPES:-tf32,bf16}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=/tmp/x
W=/tmp/rt
B=/tmp/brt
root=$(pwd)
mkdir -p $x && : >$x/summary.txt
say() { echo "$*" | tee -a $x/summary.txt; }
rm -rf $W && mkdir -p $W
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
(cmake -S $W -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null &&
    timeout 300 cmake --build $B -j16 --target camel test_gpu_gemm) >$x/build_base.log 2>&1
rc=$?
say "base build rc=$rc at $(at)"
[ $rc -eq 0 ] || { tail -20 $x/build_base.log; exit 1; }
cp $B/apps/camel/camel /tmp/camel_base
SETS="--dtype $DTYPES --set square,gpt2 --sizes 2048,4096,8192 --ops NN,NT"
timeout 200 /tmp/camel_base tune gemm $SETS --out $x/run.inc --json $x/tune.json >$x/tune.txt 2>&1
rc=$?
say "tune rc=$rc at $(at): $(grep -c '^CML_SM90_TUNED' $x/run.inc 2>/dev/null) rows"
[ $rc -eq 0 ] || { tail -20 $x/tune.txt; exit 1; }
python3 $root/dev/gemm_sm90/tuned_merge.py $root/src/kernels/cuda/gemm/gemm_sm90_tuned.inc $x/run.inc $x/tune.json \
    $x/merged.inc | tee -a $x/summary.txt
cp $x/merged.inc $W/src/kernels/cuda/gemm/gemm_sm90_tuned.inc
diff $root/src/kernels/cuda/gemm/gemm_sm90_tuned.inc $x/merged.inc >$x/table.diff
(timeout 200 cmake --build $B -j16 --target camel test_gpu_gemm) >$x/build_new.log 2>&1
rc=$?
say "new build rc=$rc at $(at)"
[ $rc -eq 0 ] || { tail -20 $x/build_new.log; exit 1; }
cp $B/apps/camel/camel /tmp/camel_new
(cd $B && timeout 90 tests/test_gpu_gemm) >$x/test.log 2>&1
say "test_gpu_gemm (new table) rc=$? at $(at): $(grep -E 'tests passed|FAIL' $x/test.log | tail -2 | tr '\n' ' ')"
round=1
need=60
while [ $round -le $ROUNDS ] && [ "$(left)" -gt $need ]; do
    t1=$(date +%s)
    for v in base new; do
        timeout 120 /tmp/camel_$v bench gemm $SETS --max-f32 8192 --reps 20 >$x/bench_${v}_$round.txt 2>&1
        echo "bench $v round $round rc=$? at $(at)" >>$x/summary.txt
    done
    need=$(($(date +%s) - t1 + 5))
    round=$((round + 1))
done
python3 $root/dev/gemm_sm90/bench_ab.py $x >>$x/summary.txt 2>&1
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
