#!/usr/bin/env bash
# Session 25: the split-K gather with a peek (cml__sm90_split_gather<BN, PEEK>: a split that finds every other split
# counted in stores no partial and does not count in; the last split's own partial from registers). camel-base =
# 70a55c2, camel-peek = + the change, camel-tl / camel-tlpeek = the same with -DCML_SM90_DEV_TIMELINE=1; test_gpu_gemm
# of the change whole, compute-sanitizer of its split tests; the bf16 GPT-2 set's timelines (timeline.py,
# timeline_ends.py on 768 x 768 x 8192, the 3-split plan); then the GPT-2 set of all three 16/32-bit types in turns.
#   XDIR=build-s25x bash dev/gemm_sm90/run_s25_peek.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s25x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
run_tests gemm
sanitize /tmp/bin/test_gpu_gemm test_split_k test_sm90_configs
tests_summary
for v in tl tlpeek; do
    mkdir -p $X/tl_$v
    CML_SM90_TL_DIR=$X/tl_$v timeout 120 /tmp/bin/camel-$v bench gemm --dtype bf16 --set gpt2 --reps 3 >$X/bench_tl_$v.txt 2>&1
    stamp "timeline $v rc $?"
    python3 dev/gemm_sm90/timeline.py $X/tl_$v/tl_768x768x8192_TN.txt >$X/tl_summary_$v.txt 2>&1
    python3 dev/gemm_sm90/timeline_ends.py $X/tl_$v/tl_768x768x8192_TN.txt >>$X/tl_summary_$v.txt 2>&1
done
in_turns ${ROUNDS:-4} "base peek" bench gemm --dtype bf16,fp16,tf32 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X base peek >$X/summary.txt 2>&1
cat $X/stages.txt $X/tl_summary_*.txt
grep "768x768x8192\|geomean" $X/summary.txt
