#!/usr/bin/env bash
# Session 26: the early start in two forms -- v1 (parameters and tensor maps fetched under the barriers' init) and v2
# (the producer's first tile also located there; the library's form) -- test_gpu_gemm whole and the three sanitizers
# of test_sm90_configs and test_sm90_wide160 (v2), the start-up in parts (timeline builds tlv1 / tlv2), then camel-est
# (before), camel-v1 and camel-v2 over the bf16 / fp16 GPT-2 set in turns, ROUNDS rounds (default 3).
#   XDIR=build-s26x bash dev/gemm_sm90/run_s26_startup2.sh   (carry build-s26x)
set -u
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
unpack camel-tlv2 camel-est camel-v1 camel-v2 test_gpu_gemm
run_tests gemm
TOOLS="memcheck synccheck racecheck" sanitize /tmp/bin/test_gpu_gemm test_sm90_configs test_sm90_wide160
tests_summary
for v in tlv2; do
    mkdir -p $X/$v
    CML_SM90_TL_DIR=$X/$v timeout 60 /tmp/bin/camel-$v bench gemm --dtype bf16 --set gpt2 --reps 3 >$X/bench_$v.txt 2>&1
    echo "== $v"; python3 dev/gemm_sm90/startup_parts.py $X/$v/tl_*.txt
done | tee $X/startup.txt
in_turns $ROUNDS "est v1 v2" bench gemm --dtype bf16,fp16 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X est v1 v2 >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
