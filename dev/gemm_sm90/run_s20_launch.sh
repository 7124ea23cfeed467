#!/usr/bin/env bash
# Session 20: is the cluster-2 cost the launch? (1) cluster_launch_probe (carried as build-s20x/clp): an empty
# frame kernel launched plain, with the cluster attribute at 1 (as the library launches cluster 1), and as clusters
# of 2; (2) camel tune gemm with new, mc3 (cluster launch, no multicast, no coupling) and mc4 (the cluster-2 tile
# order launched without clusters), c2 / c1 per tile as run_s20_mc.sh; (3) camel bench gemm with new and plain1
# (cluster 1 launched without the attribute: CML_SM90_DEV_PLAIN1) in turns, ROUNDS rounds.
#   bash dev/gemm_sm90/run_s20_launch.sh; tar czf $OUT/logs.tgz -C /tmp/x .    (carry build-s20x; timeout_s 600)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-new camel-mc3 camel-mc4 camel-plain1
timeout 60 build-s20x/clp 50 >$X/probe.txt 2>&1
stamp "probe rc $?"
for v in new mc3 mc4; do
    timeout 170 /tmp/bin/camel-$v tune gemm --dtype bf16 --set gpt2,square --sizes 2048,4096 --ops NN \
        --json $X/tune_$v.json --out $X/tuned_$v.inc >$X/tune_$v.txt 2>&1
    stamp "tune $v rc $?"
done
in_turns ${ROUNDS:-4} "new plain1" bench gemm --dtype bf16 --set gpt2,square --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_tune_c2.py $X new mc3 mc4 >$X/tune_summary.txt 2>&1
python3 dev/gemm_sm90/s20_summary.py $X new plain1 >$X/summary.txt 2>&1
cat $X/stages.txt $X/probe.txt $X/tune_summary.txt $X/summary.txt
