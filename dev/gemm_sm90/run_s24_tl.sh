#!/usr/bin/env bash
# Session 24: where stream-K's time goes. camel-tl (gemm_sm90.cu with -DCML_SM90_DEV_TIMELINE=1, carried in
# build-s24x/) runs the bf16 GPT-2 set with CML_SM90_TL_DIR set, once as planned and once with CML_SM90_DEV_SK
# (every weight gradient as stream-K, 192 wide, cluster 1; then 256 wide, cluster 2); camel-new the same set for the
# real times as planned.
#   XDIR=build-s24x bash dev/gemm_sm90/run_s24_tl.sh; (carry build-s24x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-tl camel-new
for v in dp sk192 sk256; do
    mkdir -p $X/tl_$v
    case $v in dp) sk= ;; sk192) sk=192,1 ;; sk256) sk=256,2 ;; esac
    if [ -n "$sk" ]; then export CML_SM90_DEV_SK=$sk; else unset CML_SM90_DEV_SK; fi
    CML_SM90_TL_DIR=$X/tl_$v timeout 120 /tmp/bin/camel-tl bench gemm --dtype bf16 --set gpt2 --reps 3 \
        >$X/bench_tl_$v.txt 2>&1
    stamp "timeline $v rc $?"
done
timeout 100 /tmp/bin/camel-new bench gemm --dtype bf16 --set gpt2 --reps 20 >$X/bench_base.txt 2>&1
stamp "base run rc $?"
for v in dp sk192 sk256; do python3 dev/gemm_sm90/timeline.py $X/tl_$v/tl_*TN.txt >$X/tl_summary_$v.txt 2>&1; done
cat $X/stages.txt
grep -h "x8192\|TN" $X/bench_base.txt | head
for v in dp sk192 sk256; do echo "== $v"; cat $X/tl_summary_$v.txt | head -60; done
