#!/usr/bin/env bash
# Session 26: where a GEMM CTA's first ~1500 clocks go (startup_parts.py over timeline builds' dumps of the bf16 GPT-2
# set: camel-tlv0 with CML_SM90_EARLY_START=0, camel-tlv1 with 1), then camel-est (the tree before the early start) and
# camel-v1 (with it) over the bf16 / fp16 GPT-2 set in turns, ROUNDS rounds (default 3).
#   XDIR=build-s26x bash dev/gemm_sm90/run_s26_startup.sh   (carry build-s26x)
set -u
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
unpack camel-tlv0 camel-tlv1 camel-est camel-v1
for v in tlv0 tlv1; do
    mkdir -p $X/$v
    CML_SM90_TL_DIR=$X/$v timeout 60 /tmp/bin/camel-$v bench gemm --dtype bf16 --set gpt2 --reps 3 >$X/bench_$v.txt 2>&1
    stamp "timeline $v rc $?"
    echo "== $v"; python3 dev/gemm_sm90/startup_parts.py $X/$v/tl_*.txt
done | tee $X/startup.txt
in_turns $ROUNDS "est v1" bench gemm --dtype bf16,fp16 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X est v1 >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
