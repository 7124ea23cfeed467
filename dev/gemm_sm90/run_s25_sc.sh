#!/usr/bin/env bash
# Session 25: a K split as one cluster (cml__gemm_sm90_config.schedule 2, cml__sm90_split_cluster_sum: the splits of a
# tile add their partials in rank 0's shared memory, no L2 round trip and no count-in), run twice: the partials sent
# by st.async (s25_split_cluster.patch; logs s25_results/sc_*) and by bulk copies (s25_split_cluster_bulk.patch;
# s25_results/sc_bulk_*). camel-base =
# 70a55c2; camel-sc = the change (its table as before: 768 x 768 x 8192 in 3 splits through L2, cluster 2);
# camel-sct = the change with the three attn_proj weight-gradient rows on the split cluster (128 x 128, 3 splits);
# camel-tlsct = camel-sct with -DCML_SM90_DEV_TIMELINE=1. test_gpu_gemm of the change whole, compute-sanitizer of its
# split tests; the timeline of 768 x 768 x 8192; `camel tune gemm` of the GPT-2 set (which now tries the split
# cluster); then the GPT-2 set of all three 16/32-bit types in turns.
#   XDIR=build-s25x bash dev/gemm_sm90/run_s25_sc.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s25x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
run_tests gemm
sanitize /tmp/bin/test_gpu_gemm test_sm90_split_cluster test_split_k
tests_summary
mkdir -p $X/tl_sct
CML_SM90_TL_DIR=$X/tl_sct timeout 120 /tmp/bin/camel-tlsct bench gemm --dtype bf16 --set gpt2 --reps 3 >$X/bench_tl_sct.txt 2>&1
stamp "timeline rc $?"
python3 dev/gemm_sm90/timeline.py $X/tl_sct/tl_768x768x8192_TN.txt >$X/tl_summary_sct.txt 2>&1
python3 dev/gemm_sm90/timeline_ends.py $X/tl_sct/tl_768x768x8192_TN.txt >>$X/tl_summary_sct.txt 2>&1
timeout 200 /tmp/bin/camel-sc tune gemm --dtype bf16,fp16,tf32 --set gpt2 --out $X/tune.inc --json $X/tune.json >$X/tune.txt 2>&1
stamp "tune rc $?"
in_turns ${ROUNDS:-4} "base sct" bench gemm --dtype bf16,fp16,tf32 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X base sct >$X/summary.txt 2>&1
cat $X/stages.txt $X/tl_summary_sct.txt
grep "attn_proj" $X/tune.txt
grep "768x768x8192\|geomean" $X/summary.txt
