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
. "$(dirname "$0")/../carried.sh"
unpack
for t in reduce softmax convert; do
    (timeout 200 /tmp/bin/test_gpu_$t >$X/test_$t.log 2>&1; echo "rc $?" >>$X/test_$t.log) &
done
wait
sanitize /tmp/bin/test_gpu_reduce &
sanitize /tmp/bin/test_gpu_convert &
wait
tests_summary
in_turns ${ROUNDS:-3} "head la" bench membound --ops sum,cross_entropy,convert_scaled_e4m3_amax --mode both
python3 dev/membound/ab_summary.py $X head >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
