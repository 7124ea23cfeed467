#!/usr/bin/env bash
# Session 11 (helper h11c), one device call: the LayerNorm / RMSNorm forward's rows of 3..16 chunks as
# thread-block clusters (src/kernels/cuda/norm/norm_fwd_cluster.cuh) against the paths they replace, in
# the SAME binary: CML_NORM_FWD_CLUSTER=0 sends the rows back to the register-row kernels (1024x32768)
# and the one-pass L2 row-sync kernels (256x262144), whose SASS is byte-identical to the base tree's
# (checked locally with cuobjdump), so "old" is the base tree's kernel sequence. Binaries built on the
# local machine (build-cuda: camel, test_gpu_layernorm, test_gpu_rmsnorm, s11_bits) and carried as one
# archive, so the call builds nothing:
#   bash dev/membound/s11_ab.sh build-ab/h11c-bin.tar.xz
# 1. in parallel (nothing timed): both tests with the defaults and with each knob, compute-sanitizer
#    memcheck + racecheck of both tests (CML_TEST_SANITIZER=1; also test_fwd_cluster_rows alone, in
#    case a whole test runs past its limit under a tool), and the output fingerprints (s11_bits.c) old
#    (knob 0) / new / PIPE=0;
# 2. camel bench membound --ops layernorm,rmsnorm (steady and cold), old / new / knobs alternating,
#    twice;
# Logs in /tmp/x, packed into $OUT/logs.tgz after every stage; the summary is printed last.
# DRY=1: no GPU; stub binaries from dev/membound/s11_dry/ (made-up output) to check the flow.
set -u
bin_tar=${1:-build-ab/h11c-bin.tar.xz}
root=$(pwd)
X=/tmp/x
B=/tmp/bin
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
rm -rf $X $B && mkdir -p $X $B
pack() { tar czf "$OUT/logs.tgz" -C $X . 2>/dev/null; }
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a $X/stages.txt; }
OPS=layernorm,rmsnorm
TESTS="test_gpu_layernorm test_gpu_rmsnorm"
# Knobs of the new build, each benched after each new run and tested once: no next-row prefetch in
# the cluster kernels (one row of registers, more CTAs per SM); clusters of at most 8 (bf16/f16
# 256x262144 then falls back to the one-pass kernel: a check of the fallback, not a variant).
KNOBS=${KNOBS-"CML_NORM_FWD_CLUSTER_PIPE=0"}
TKNOBS="CML_NORM_FWD_CLUSTER_PIPE=0 CML_NORM_FWD_CLUSTER=8"
OLD=CML_NORM_FWD_CLUSTER=0
SAN=${SAN:-compute-sanitizer}
if [ "${DRY:-0}" = 1 ]; then
    cp "$root"/dev/membound/s11_dry/* $B/ && chmod +x $B/*
    SAN="$B/fake-sanitizer"
else
    tar xJf "$root/$bin_tar" -C $B || { stamp "unpack FAILED"; exit 1; }
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader >$X/gpu.txt 2>&1
stamp "unpacked"

for t in $TESTS; do
    (cd $B && timeout 200 ./$t >$X/$t.log 2>&1; echo "rc $?" >>$X/$t.log) &
    for k in $TKNOBS $OLD; do
        (cd $B && env $k timeout 200 ./$t >$X/${t}_$k.log 2>&1; echo "rc $?" >>$X/${t}_$k.log) &
    done
    for tool in memcheck racecheck; do
        (cd $B && CML_TEST_SANITIZER=1 timeout 200 $SAN --tool $tool --error-exitcode 99 \
            --report-api-errors no ./$t >$X/san_${tool}_$t.log 2>&1
            echo "rc $?" >>$X/san_${tool}_$t.log) &
        (cd $B && CML_TEST_ONLY=test_fwd_cluster_rows CML_TEST_SANITIZER=1 timeout 200 $SAN --tool $tool \
            --error-exitcode 99 --report-api-errors no ./$t >$X/san_${tool}_${t}_fwdcluster.log 2>&1
            echo "rc $?" >>$X/san_${tool}_${t}_fwdcluster.log) &
    done
done
(cd $B && env $OLD timeout 200 ./s11_bits >$X/bits_old.txt 2>&1
 timeout 200 ./s11_bits >$X/bits_new.txt 2>&1
 for k in $KNOBS; do env $k timeout 200 ./s11_bits >$X/bits_new_$k.txt 2>&1; done) &
wait
stamp "checks done"
pack

for i in 1 2; do
    env $OLD $B/camel bench membound --ops $OPS >$X/bench_old_$i.txt 2>&1
    stamp "bench old $i"
    $B/camel bench membound --ops $OPS >$X/bench_new_$i.txt 2>&1
    stamp "bench new $i"
    for k in $KNOBS; do
        env $k $B/camel bench membound --ops $OPS >$X/bench_new_${k}_$i.txt 2>&1
        stamp "bench new $k $i"
    done
    pack
done

python3 "$root"/dev/membound/s9_summary.py $X >$X/summary.txt 2>&1
pack
echo "== GPU: $(cat $X/gpu.txt)"
cat $X/summary.txt
cat $X/stages.txt
