#!/usr/bin/env bash
# Session 29: the first stages' early issue in cluster launches too (each CTA loads them whole itself, SELF; the tree,
# camel-e2) against single CTAs only (-DCML_SM90_EARLY=1, camel-e1), in turns over the squares, GPT-2 and batched
# sets (bf16, fp16, tf32); test_gpu_gemm whole and compute-sanitizer (memcheck, racecheck, synccheck) of its forced
# cluster configurations (test_sm90_configs, test_sm90_wide160). Binaries built locally into build-s29x/. Results in
# $OUT/s29_early2.tar.xz.
#   run(carry=["build-s29x"], command="XDIR=build-s29x bash dev/gemm_sm90/run_s29_early2.sh")
set -u
XDIR=${XDIR:-build-s29x}
. "$(dirname "$0")/../carried.sh"
unpack camel-e1 camel-e2 test_gpu_gemm
run_tests gemm
sanitize /tmp/bin/test_gpu_gemm test_sm90_configs test_sm90_wide160
tests_summary
in_turns ${ROUNDS:-4} "e1 e2" bench gemm --dtype bf16,fp16,tf32 --set square,gpt2,batched --sizes 1024,2048,4096,8192 \
    --max-f32 4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X e1 e2 >$X/summary.txt 2>&1
cat $X/stages.txt | tail -12; cat $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar -C $X -cJf ${OUT:-/tmp/out}/s29_early2.tar.xz .
