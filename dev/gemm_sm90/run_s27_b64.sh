#!/usr/bin/env bash
# Session 27: the 160-wide tile's N-major B loaded exactly (five 32-column blocks in the 64-byte swizzle instead of
# three 64-column blocks, the last half unused: 20% fewer B bytes into each SM), which also frees 4 KB a stage, so the
# epilogue stages 4 of its 5 32-column blocks a round instead of 2. test_gpu_gemm whole, the three sanitizers of
# test_sm90_configs / test_sm90_wide160, then camel-fd (the tree before) against camel-b64 in turns.
# V=b64c (the second build): the exact load for columns of CTAs only (CN = 1; 2 x 2 clusters keep 64-column blocks,
# where the first build read 0.85-0.90x); sanitizers of test_sm90_wide160 only.
#   XDIR=build-s27x bash dev/gemm_sm90/run_s27_b64.sh   (carry build-s27x)
set -u
V=${V:-b64}
ROUNDS=${ROUNDS:-4}
. "$(dirname "$0")/../carried.sh"
unpack camel-fd camel-$V test_gpu_gemm-$V
mv /tmp/bin/test_gpu_gemm-$V /tmp/bin/test_gpu_gemm
run_tests gemm
TOOLS="memcheck racecheck synccheck" sanitize /tmp/bin/test_gpu_gemm $([ $V = b64 ] && echo test_sm90_configs) test_sm90_wide160
tests_summary
in_turns $ROUNDS "fd $V" bench gemm --dtype bf16,fp16 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X fd $V >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s27_$V.tgz -C $X .
