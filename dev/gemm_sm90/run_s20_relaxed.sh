#!/usr/bin/env bash
# Session 20: the cluster kernels without release barriers -- the start's cluster barrier relaxed (the mbarrier
# init fence publishes the inits) and the end's replaced by the producer waiting for the last fill of every stage
# to be freed (as CUTLASS's producer tail). cluster_launch_probe.cu measured each release barrier at ~0.7 us a
# launch. Binaries built locally for 90a-real, stripped and xz-compressed into build-s20x/ (carried): camel-old (the
# parent commit, 4bf5bfe: a git worktree), camel-new and test_gpu_gemm-new (this commit).
# Steps: test_gpu_gemm; compute-sanitizer racecheck / synccheck / memcheck of the forced configurations (c2
# included) and the TMA epilogues; camel tune gemm with old and new (every configuration's time: c2 / c1 per tile);
# camel bench gemm bf16 old / new in turns, ROUNDS rounds. Summary last.
#   bash dev/gemm_sm90/run_s20_relaxed.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s20x; timeout_s 600)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
T=/tmp/bin/test_gpu_gemm-new
(timeout 240 $T >$X/test.log 2>&1; echo "rc $?" >>$X/test.log) &
sanitize $T test_sm90_configs test_tma_epilogues
wait
tests_summary
for v in old new; do
    timeout 170 /tmp/bin/camel-$v tune gemm --dtype bf16 --set gpt2,square --sizes 2048,4096 --ops NN \
        --json $X/tune_$v.json --out $X/tuned_$v.inc >$X/tune_$v.txt 2>&1
    stamp "tune $v rc $?"
done
in_turns ${ROUNDS:-6} "old new" bench gemm --dtype bf16 --set gpt2,square --sizes 1024,2048,4096,8192 --reps 20
python3 dev/gemm_sm90/s20_tune_c2.py $X old new >$X/tune_summary.txt 2>&1
python3 dev/gemm_sm90/s20_summary.py $X old new >$X/summary.txt 2>&1
cat $X/stages.txt $X/tune_summary.txt $X/summary.txt
