#!/usr/bin/env bash
# Session 8, one device call: old (the base tree) and new (this tree) built, checked and timed in
# the same job. Run from the repository root of the device machine after unpacking this tree into
# /tmp/w (the command line of the `run` call):
#   bash /tmp/w/dev/membound/s8_ab.sh build-ab/norm-base.tgz
# 1. builds the base tree in /tmp/o/b (camel + the fingerprint program dev/membound/norm_bits.c,
#    copied in as tests/gpu/zz_norm_bits.c), keeps its binaries, then copies the files of this tree
#    that differ over the base tree and rebuilds incrementally (only what they touch);
# 2. in parallel (nothing timed): the fingerprints of both builds (diffed; the new build also with
#    each A/B knob of KNOBS), the GPU tests test_gpu_{layernorm,rmsnorm,softmax} of the new build
#    (layernorm and rmsnorm also with all knobs on), compute-sanitizer memcheck and racecheck of
#    test_gpu_{layernorm,rmsnorm} (CML_TEST_SANITIZER=1, all knobs on);
# 3. camel bench membound --mode steady over the ops below, old/new alternating twice, each new
#    run followed by the new build under each knob (norm backward only);
# 4. ncu (clock control off) of the bf16 norm backward kernels of both builds, one launch each
#    (call 2 also timed the partial sums at 8 and 32 phases, and nbr at 512 words).
# Logs in /tmp/x, packed into $OUT/logs.tgz after every stage; the summary is printed last.
set -u
base_tgz=$1
root=$(pwd)
X=/tmp/x
rm -rf $X /tmp/o /tmp/old-bin && mkdir -p $X /tmp/o /tmp/old-bin
pack() { tar czf "$OUT/logs.tgz" -C $X . 2>/dev/null; }
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a $X/stages.txt; }
OPS=layernorm_bwd,rmsnorm_bwd,softmax,softmax_bwd,layernorm,rmsnorm,cross_entropy_bwd
# A/B knobs of the new build (name=value), each run alone; ALLON: all at once for the tests and the
# sanitizer (device call 2 of session 8 also ran CML_NORM_BWD_NBR_WORDS=512 CML_NORM_BWD_PHASES=32,
# since taken out: dev/membound/s8_nbr512_phases32.patch). NCU=0 skips step 4.
KNOBS=${KNOBS-"CML_NORM_BWD_DISCARD=0"}
ALLON=${ALLON-""}

tar xzf "$root/$base_tgz" -C /tmp/o
cp /tmp/w/dev/membound/norm_bits.c /tmp/o/tests/gpu/zz_norm_bits.c
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader >$X/gpu.txt 2>&1
stamp "configure old"
cmake -S /tmp/o -B /tmp/o/b -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >$X/configure.log 2>&1 ||
    { stamp "configure FAILED"; tail -20 $X/configure.log; pack; exit 1; }
cmake --build /tmp/o/b -j16 --target camel zz_norm_bits >$X/build_old.log 2>&1 ||
    { stamp "old build FAILED"; grep -E 'error' $X/build_old.log | head; pack; exit 1; }
cp /tmp/o/b/apps/camel/camel /tmp/o/b/tests/zz_norm_bits /tmp/old-bin/
stamp "old built"
# this tree's differing files over the base tree (new mtimes: ninja rebuilds what they touch)
(cd /tmp/w && find src include apps tests bench CMakeLists.txt -type f) | while read -r f; do
    if ! cmp -s "/tmp/w/$f" "/tmp/o/$f"; then mkdir -p "$(dirname "/tmp/o/$f")"; cp "/tmp/w/$f" "/tmp/o/$f"; echo "$f"; fi
done >$X/overlaid.txt
cmake --build /tmp/o/b -j16 --target camel zz_norm_bits test_gpu_layernorm test_gpu_rmsnorm test_gpu_softmax \
    >$X/build_new.log 2>&1 || { stamp "new build FAILED"; grep -E 'error' $X/build_new.log | head -20; pack; exit 1; }
grep -ci 'warning' $X/build_new.log >$X/build_new_warnings.txt
stamp "new built ($(wc -l <$X/overlaid.txt) files overlaid, $(cat $X/build_new_warnings.txt) warning lines)"
pack

N=/tmp/o/b
(/tmp/old-bin/zz_norm_bits >$X/bits_old.txt 2>&1; echo "rc $?" >>$X/bits_old.txt) &
(cd $N/tests && ./zz_norm_bits >$X/bits_new.txt 2>&1; echo "rc $?" >>$X/bits_new.txt) &
for k in $KNOBS; do
    (cd $N/tests && env $k ./zz_norm_bits >$X/bits_new_$k.txt 2>&1; echo "rc $?" >>$X/bits_new_$k.txt) &
done
for t in test_gpu_layernorm test_gpu_rmsnorm test_gpu_softmax; do
    (cd $N/tests && timeout 200 ./$t >$X/$t.log 2>&1; echo "rc $?" >>$X/$t.log) &
done
for t in test_gpu_layernorm test_gpu_rmsnorm; do
    [ -n "$ALLON" ] && (cd $N/tests && env $ALLON timeout 200 ./$t >$X/${t}_knobs.log 2>&1
        echo "rc $?" >>$X/${t}_knobs.log) &
    for tool in memcheck racecheck; do
        (cd $N/tests && env $ALLON CML_TEST_SANITIZER=1 timeout 170 compute-sanitizer --tool $tool \
            --error-exitcode 99 --report-api-errors no ./$t >$X/san_${tool}_$t.log 2>&1
            echo "rc $?" >>$X/san_${tool}_$t.log) &
    done
done
wait
stamp "checks done"
pack

for i in 1 2; do
    /tmp/old-bin/camel bench membound --mode steady --ops $OPS >$X/bench_old_$i.txt 2>&1
    $N/apps/camel/camel bench membound --mode steady --ops $OPS >$X/bench_new_$i.txt 2>&1
    for k in $KNOBS; do
        env $k $N/apps/camel/camel bench membound --mode steady --ops layernorm_bwd,rmsnorm_bwd \
            >$X/bench_new_${k}_$i.txt 2>&1
    done
    stamp "bench round $i"
    pack
done

[ "${NCU:-1}" = 0 ] || {
M=sm__inst_executed.avg.per_cycle_active,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,smsp__inst_executed_op_global_st.sum
for v in old new; do
    bin=/tmp/old-bin/camel; [ $v = new ] && bin=$N/apps/camel/camel
    timeout 60 ncu --clock-control none --kernel-name-base mangled -k 'regex:(nbl|nbr|rows)_kernelILi2E' \
        --filter-mode per-launch-config --launch-skip 3 --launch-count 1 --metrics $M --csv \
        $bin bench membound --mode cold --reps 20 --ops layernorm_bwd,rmsnorm_bwd >$X/ncu_$v.csv 2>$X/ncu_$v.err
    echo "rc $?" >>$X/ncu_$v.err
done
stamp "ncu done"
}
python3 /tmp/w/dev/membound/s8_summary.py $X >$X/summary.txt 2>&1
pack
cat $X/summary.txt
cat $X/stages.txt
