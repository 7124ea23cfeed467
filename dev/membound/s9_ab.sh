#!/usr/bin/env bash
# Session 9, one device call (adapted from s8_ab.sh): old (the base tree) and new (this tree) built,
# checked and timed in the same job. Run from the repository root of the device machine after
# unpacking this tree into /tmp/w (the command line of the `run` call):
#   bash /tmp/w/dev/membound/s9_ab.sh build-ab/h9m-base.tgz
# 1. builds the base tree in /tmp/o/b (camel + the fingerprint program dev/membound/s9_bits.c, copied
#    in as tests/gpu/zz_s9_bits.c), keeps its binaries, then copies the files of this tree that
#    differ over the base tree and rebuilds incrementally (only what they touch);
# 2. in parallel (nothing timed): the fingerprints of both builds (diffed), test_gpu_{softmax,
#    convert,reduce} of the new build, compute-sanitizer memcheck + racecheck of test_gpu_convert
#    and racecheck of test_gpu_reduce (CML_TEST_SANITIZER=1);
# 3. camel bench membound (steady and cold) over OPS, old/new alternating twice;
# 4. if time is left (DEADLINE seconds from the start), ncu of the changed kernels of both builds,
#    one launch each: instructions executed, IPC, DRAM bytes.
# Logs in /tmp/x, packed into $OUT/logs.tgz after every stage; the summary is printed last.
set -u
base_tgz=$1
root=$(pwd)
X=/tmp/x
rm -rf $X /tmp/o /tmp/old-bin && mkdir -p $X /tmp/o /tmp/old-bin
pack() { tar czf "$OUT/logs.tgz" -C $X . 2>/dev/null; }
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a $X/stages.txt; }
left() { echo $((${DEADLINE:-360} - ($(date +%s) - t0))); }
OPS=${OPS:-cross_entropy,convert_scaled_e4m3,convert_scaled_e4m3_amax,sum}
TESTS="test_gpu_softmax test_gpu_convert test_gpu_reduce"
# A/B knobs of the new build (name=value), each benched alone after each new run, fingerprinted
# once (call 2: CML_DEV_CONVERT_PER_SM=6 / =4, since removed); CHECKS=0 skips tests and sanitizer.
KNOBS=${KNOBS-""}
CHECKS=${CHECKS:-1}

tar xzf "$root/$base_tgz" -C /tmp/o
cp /tmp/w/dev/membound/s9_bits.c /tmp/o/tests/gpu/zz_s9_bits.c
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader >$X/gpu.txt 2>&1
stamp "configure old"
cmake -S /tmp/o -B /tmp/o/b -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >$X/configure.log 2>&1 ||
    { stamp "configure FAILED"; tail -20 $X/configure.log; pack; exit 1; }
cmake --build /tmp/o/b -j16 --target camel zz_s9_bits >$X/build_old.log 2>&1 ||
    { stamp "old build FAILED"; grep -E 'error' $X/build_old.log | head; pack; exit 1; }
cp /tmp/o/b/apps/camel/camel /tmp/o/b/tests/zz_s9_bits /tmp/old-bin/
stamp "old built"
(cd /tmp/w && find src include apps tests bench CMakeLists.txt -type f) | while read -r f; do
    if ! cmp -s "/tmp/w/$f" "/tmp/o/$f"; then mkdir -p "$(dirname "/tmp/o/$f")"; cp "/tmp/w/$f" "/tmp/o/$f"; echo "$f"; fi
done >$X/overlaid.txt
cmake --build /tmp/o/b -j16 --target camel zz_s9_bits $TESTS >$X/build_new.log 2>&1 ||
    { stamp "new build FAILED"; grep -E 'error' $X/build_new.log | head -20; pack; exit 1; }
grep -ci 'warning' $X/build_new.log >$X/build_new_warnings.txt
stamp "new built ($(wc -l <$X/overlaid.txt) files overlaid, $(cat $X/build_new_warnings.txt) warning lines)"
pack

N=/tmp/o/b
(/tmp/old-bin/zz_s9_bits >$X/bits_old.txt 2>&1; echo "rc $?" >>$X/bits_old.txt) &
(cd $N/tests && ./zz_s9_bits >$X/bits_new.txt 2>&1; echo "rc $?" >>$X/bits_new.txt) &
for k in $KNOBS; do
    (cd $N/tests && env $k ./zz_s9_bits >$X/bits_new_$k.txt 2>&1; echo "rc $?" >>$X/bits_new_$k.txt) &
done
[ "$CHECKS" = 1 ] && for t in $TESTS; do
    (cd $N/tests && timeout 130 ./$t >$X/$t.log 2>&1; echo "rc $?" >>$X/$t.log) &
done
[ "$CHECKS" = 1 ] && for tt in memcheck:test_gpu_convert racecheck:test_gpu_convert racecheck:test_gpu_reduce; do
    tool=${tt%%:*} t=${tt#*:}
    (cd $N/tests && CML_TEST_SANITIZER=1 timeout 130 compute-sanitizer --tool $tool --error-exitcode 99 \
        --report-api-errors no ./$t >$X/san_${tool}_$t.log 2>&1
        echo "rc $?" >>$X/san_${tool}_$t.log) &
done
wait
stamp "checks done"
pack

for i in 1 2; do
    /tmp/old-bin/camel bench membound --ops $OPS >$X/bench_old_$i.txt 2>&1
    stamp "bench old $i"
    $N/apps/camel/camel bench membound --ops $OPS >$X/bench_new_$i.txt 2>&1
    stamp "bench new $i"
    for k in $KNOBS; do
        env $k $N/apps/camel/camel bench membound --ops $OPS >$X/bench_new_${k}_$i.txt 2>&1
        stamp "bench new $k $i"
    done
    pack
done

if [ "$(left)" -gt 40 ]; then
    M=sm__inst_executed.avg.per_cycle_active,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
    for v in old new; do
        bin=/tmp/old-bin/camel; [ $v = new ] && bin=$N/apps/camel/camel
        timeout $(( $(left) / 2 > 10 ? $(left) / 2 : 10 )) ncu --clock-control none --kernel-name-base mangled \
            -k 'regex:convert_scaled_vec_kernelILi3ELi[02]E|ce_fwd_(words|split)_kernelILi2E|softmax_stats_kernelILi2E' \
            --filter-mode per-launch-config --launch-skip 2 --launch-count 1 --metrics $M --csv \
            $bin bench membound --mode cold --reps 20 --ops cross_entropy,convert_scaled_e4m3,convert_scaled_e4m3_amax \
            >$X/ncu_$v.csv 2>$X/ncu_$v.err
        echo "rc $?" >>$X/ncu_$v.err
    done
    stamp "ncu done"
fi
python3 /tmp/w/dev/membound/s9_summary.py $X >$X/summary.txt 2>&1
pack
cat $X/summary.txt
cat $X/stages.txt
