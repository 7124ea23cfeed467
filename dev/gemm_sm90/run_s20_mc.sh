#!/usr/bin/env bash
# Session 20: what a cluster of 2 costs -- B multicast or the coupled stages? camel tune gemm (every valid
# configuration's quick-pass median, --json "quick") with three builds of s20_variants.sh (carried in build-s20x/):
# new (the library: B multicast, stages coupled), mc1 (coupled, each CTA loads its whole B: CML_SM90_DEV_MC=1),
# mc3 (neither: cluster launch and tile order only). Cluster 1 is the same code in all three: the in-process
# control. Summary last: per shape and tile, time c2 / c1 in each build.
#   bash dev/gemm_sm90/run_s20_mc.sh; tar czf $OUT/logs.tgz -C /tmp/x .     (carry build-s20x; timeout_s 600)
set -u
V=${VARIANTS:-new mc1 mc3}
. "$(dirname "$0")/../carried.sh"
unpack $(for v in $V; do echo camel-$v; done)
for v in $V; do
    timeout 170 /tmp/bin/camel-$v tune gemm --dtype bf16 --set gpt2,square --sizes 2048,4096 --ops NN \
        --json $X/tune_$v.json --out $X/tuned_$v.inc >$X/tune_$v.txt 2>&1
    stamp "tune $v rc $?"
done
python3 dev/gemm_sm90/s20_tune_c2.py $X $V >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
