#!/usr/bin/env bash
# Session 23: the first tile's first k-blocks loaded in the prologue (gemm_sm90_kernel.cuh, `early`): test_gpu_gemm
# whole, compute-sanitizer memcheck / racecheck / synccheck of test_sm90_configs and test_sm90_pingpong, then camel
# bench gemm in turns, ROUNDS rounds (default 3): early = the tree, noearly = the same with CML_SM90_EARLY_LOADS=0
# (s20_variants.sh builds both). Carry build-s23x.
set -u
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
unpack camel-early camel-noearly test_gpu_gemm
run_tests gemm
sanitize /tmp/bin/test_gpu_gemm test_sm90_configs test_sm90_pingpong
tests_summary
in_turns $ROUNDS "noearly early" bench gemm --dtype bf16,fp16 --set gpt2,square --sizes 1024,2048,4096,8192 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X noearly early >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
