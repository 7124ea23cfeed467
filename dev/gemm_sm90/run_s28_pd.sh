#!/usr/bin/env bash
# Session 28: D's tensor map prefetched by consumer 0 before its first k-block (camel-pd), and the kernel ending when
# its TMA stores have read shared memory rather than when their writes are done (camel-er), against the tree (camel-base);
# the timeline build without / with the prefetch (camel-tl / camel-tlpd) for tile 0's epilogue.
#   XDIR=build-s28x bash dev/gemm_sm90/run_s28_pd.sh   (carry build-s28x)
set -u
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
unpack camel-base camel-pd camel-er camel-tl camel-tlpd
tl_rounds 1 "tl tlpd"
tl_report 1 "tl tlpd" "square tl_1024x1024x1024_NN" "square tl_2048x2048x2048_NN" "gpt2 tl_8192x768x768_NT" \
    "gpt2 tl_8192x768x3072_NN" "gpt2 tl_8192x2304x768_NT"
in_turns $ROUNDS "base pd er" bench gemm --dtype bf16,fp16 --set square,gpt2 --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X base pd er >$X/summary.txt 2>&1
cat $X/stages.txt; grep -v "^    14 \|slot  ctas\|CTA ends" $X/timelines.txt; cat $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s28_pd.tgz -C $X .
