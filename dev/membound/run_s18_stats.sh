#!/usr/bin/env bash
# Session 18, ONE device call: the norm backward's per-row loads that pass 1 waited for, moved off the row's path
# (patch dev/membound/s18_stats.patch; ncu source counters of dev/s18_first.sh found them):
#   nbw (16-bit rows of 4096 columns): gamma's words from shared memory, copied once, instead of an L1/L2 load on
#     every row (27% of the stall samples at LayerNorm bf16 4096 x 4096);
#   nbs (16-bit rows of 2..16 chunks): mean / rstd copied into the stage with its row (cp.async + the stage's
#     mbarrier) instead of loaded at the row's start (23% / 15% of the samples);
#   nbl (long rows, f32 256 x 262144 among them): mean / rstd copied a row ahead into thread-private slots.
# Steps: ab_trees (new = patch, base = without), both built at once; the two norm tests whole on new, memcheck /
# racecheck / synccheck of their *_rows tests (synccheck with CML_NORM_BWD_CLUSTER=8, as scripts/gpu-check);
# camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both, base / new in turns, ROUNDS rounds; ncu source
# counters of new's nbw / nbs / nbl f32; summary (ab_summary.py) LAST.
#   bash dev/membound/run_s18_stats.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (timeout_s 600; LIMIT 540 inside)
# Decision (fixed before the run): keep if tests and sanitizers are clean, steady base/new >= 1.02 on at least one
# of LayerNorm / RMSNorm bf16 4096x4096, bf16 1024x32768 / 256x262144, f32 256x262144, and no shape below 0.99.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-540}
ROUNDS=${ROUNDS:-3}
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x W=/tmp/w18s BASE=/tmp/b18s
root=$(pwd)
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
. dev/ab_lib.sh
ab_trees $W $BASE $root/dev/membound/s18_stats.patch >$X/trees.txt 2>&1 || { cat $X/trees.txt; exit 1; }
stamp "trees: $(tr '\n' ' ' <$X/trees.txt)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$X/gpu.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
TESTS="test_gpu_layernorm test_gpu_rmsnorm"
(cmake -S $W -B $W/b $CM >$W/configure.log 2>&1 &&
    timeout 300 cmake --build $W/b -j16 --target camel $TESTS >$W/build.log 2>&1
    echo "rc $?" >>$W/build.log) &
(cmake -S $BASE -B $BASE/b $CM >$BASE/configure.log 2>&1 &&
    timeout 300 nice -n 5 cmake --build $BASE/b -j16 --target camel >$BASE/build.log 2>&1
    echo "rc $?" >>$BASE/build.log) &
wait
for b in $W $BASE; do tail -c 60000 $b/build.log >$X/build_$(basename $b).log; done
stamp "built: new $(tail -1 $W/build.log), base $(tail -1 $BASE/build.log)"
for b in $W $BASE; do
    [ "$(tail -1 $b/build.log)" = "rc 0" ] || { stamp "$b build failed"; grep -E 'error' $b/build.log | head -20; exit 1; }
done
N=$W/b O=$BASE/b
for t in $TESTS; do
    (cd $N/tests && timeout 200 ./$t >$X/test_$t.log 2>&1; echo "rc $?" >>$X/test_$t.log) &
    for tool in memcheck racecheck synccheck; do
        cap=""; [ $tool = synccheck ] && cap="CML_NORM_BWD_CLUSTER=8"
        (cd $N/tests && env $cap CML_TEST_ONLY=_rows CML_TEST_SANITIZER=1 timeout 250 compute-sanitizer --tool $tool \
            --error-exitcode 99 --report-api-errors no ./$t >$X/san_${tool}_$t.log 2>&1
            echo "rc $?" >>$X/san_${tool}_$t.log) &
    done
done
wait
sed -i 's/^ok .*//' $X/test_*.log
for f in $X/san_*.log; do [ $(stat -c %s $f) -gt 100000 ] && { head -c 50000 $f >$f.cut; mv $f.cut $f; }; done
stamp "tests: $(for f in $X/test_*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
last=0
for r in $(seq 1 $ROUNDS); do
    [ $(($(el) + last + 10)) -gt $LIMIT ] && { stamp "round $r skipped (a round took $last s)"; break; }
    rs=$(el)
    vs="base new"; [ $((r % 2)) = 0 ] && vs="new base"
    for v in $vs; do
        B=$O; [ $v = new ] && B=$N
        timeout 100 $B/apps/camel/camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both \
            --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
    last=$(($(el) - rs))
done
for spec in "nbw:nbw_kernelILi2ELb1E" "nbs:nbs_kernelILi2ELb1E" "nbl32:nbl_kernelILi0ELb1ELi4ELb1E"; do
    IFS=: read -r name rx <<<"$spec"
    [ $(el) -gt $((LIMIT - 40)) ] && { stamp "ncu $name skipped (time)"; continue; }
    timeout 90 ncu --clock-control none --kernel-name-base mangled -k "regex:$rx" --filter-mode per-launch-config \
        --launch-skip 2 --launch-count 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
        --import-source no -o $X/ncu_$name -f $N/apps/camel/camel bench membound --mode cold --reps 20 \
        --ops layernorm_bwd >$X/ncu_$name.log 2>&1
    ncu -i $X/ncu_$name.ncu-rep --page source --csv --print-source sass >$X/src_$name.csv 2>$X/src_$name.err
    ncu -i $X/ncu_$name.ncu-rep --page details --csv >$X/det_$name.csv 2>&1
    rm -f $X/ncu_$name.ncu-rep
    stamp "ncu $name: $(wc -l <$X/src_$name.csv) source lines"
done
python3 dev/membound/ab_summary.py $X base >$X/summary.txt 2>&1
cat $X/stages.txt
cat $X/summary.txt
