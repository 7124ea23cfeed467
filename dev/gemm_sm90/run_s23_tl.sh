#!/usr/bin/env bash
# Session 23: the GEMM kernel's timelines (gemm_sm90_kernel.cuh, CML_SM90_DEV_TIMELINE) on the bf16 GPT-2 set and
# squares 2048-8192: camel-tl (s20_variants.sh tl=-DCML_SM90_DEV_TIMELINE=1, carried in build-s23x/) runs camel
# bench gemm with CML_SM90_TL_DIR set (its times are not real: each call synchronizes to dump), then camel-base (the
# same tree without the stamps) once for the real times; timeline.py summarizes.
#   XDIR=build-s23x bash dev/gemm_sm90/run_s23_tl.sh; (carry build-s23x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-tl camel-base
mkdir -p $X/tl
CML_SM90_TL_DIR=$X/tl timeout 200 /tmp/bin/camel-tl bench gemm --dtype bf16 --set gpt2,square --sizes 2048,4096,8192 \
    --reps 3 >$X/bench_tl.txt 2>&1
stamp "timeline run rc $?"
timeout 200 /tmp/bin/camel-base bench gemm --dtype bf16 --set gpt2,square --sizes 2048,4096,8192 --reps 20 \
    >$X/bench_base.txt 2>&1
stamp "base run rc $?"
python3 dev/gemm_sm90/timeline.py $X/tl/*.txt >$X/tl_summary.txt 2>&1
cat $X/stages.txt $X/bench_base.txt $X/tl_summary.txt
