#!/usr/bin/env bash
# Session 29: the first tile's first stages issued by the thread that initializes the barriers (EARLY, single-CTA
# launches) against the tree without it (-DCML_SM90_EARLY=0), in turns over the squares, GPT-2 and batched sets
# (bf16, fp16, tf32); test_gpu_gemm whole and compute-sanitizer (memcheck, racecheck, synccheck) of two of its tests;
# timelines of the early build at 1024^3 / 2048^3. Binaries built locally into build-s29x/. Results in
# $OUT/s29_early.tar.xz.
#   run(carry=["build-s29x"], command="XDIR=build-s29x bash dev/gemm_sm90/run_s29_early.sh")
set -u
XDIR=${XDIR:-build-s29x}
. "$(dirname "$0")/../carried.sh"
unpack camel-early camel-late camel-tl test_gpu_gemm
run_tests gemm
sanitize /tmp/bin/test_gpu_gemm test_shapes test_split_k
tests_summary
in_turns ${ROUNDS:-4} "late early" bench gemm --dtype bf16,fp16,tf32 --set square,gpt2,batched --sizes 1024,2048,4096,8192 \
    --max-f32 4096 --reps 20
mkdir -p $X/tl
CML_SM90_TL_SEQ=1 CML_SM90_TL_DIR=$X/tl timeout 100 /tmp/bin/camel-tl bench gemm --dtype bf16 --set square \
    --sizes 1024,2048 --reps 3 >$X/tlbench.txt 2>&1
for f in $(ls $X/tl/tl_1024x1024x1024_NN_*.txt | tail -1) $(ls $X/tl/tl_2048x2048x2048_NN_*.txt | tail -1); do
    echo "== $(basename $f)"
    python3 dev/gemm_sm90/startup_parts.py $f
    python3 dev/gemm_sm90/timeline.py $f | tail -4
done >$X/timelines.txt 2>&1
python3 dev/gemm_sm90/s20_summary.py $X late early >$X/summary.txt 2>&1
cat $X/stages.txt | tail -14; cat $X/summary.txt $X/timelines.txt
mkdir -p ${OUT:-/tmp/out} && tar -C $X -cJf ${OUT:-/tmp/out}/s29_early.tar.xz .
