#!/usr/bin/env bash
# Session 29: the tensor maps prefetched at the kernel's entry, before the barriers' init, in the launches that issue
# their first stages early (camel-pf1, the tree) against without (-DCML_SM90_EARLY_PF=0, camel-pf0), in turns over the
# squares 1024-4096 and GPT-2 (bf16, fp16, tf32). Binaries built locally into build-s29x/.
#   run(carry=["build-s29x"], command="XDIR=build-s29x bash dev/gemm_sm90/run_s29_earlypf.sh")
set -u
XDIR=${XDIR:-build-s29x}
. "$(dirname "$0")/../carried.sh"
unpack camel-pf0 camel-pf1
in_turns ${ROUNDS:-6} "pf0 pf1" bench gemm --dtype bf16,fp16,tf32 --set square,gpt2 --sizes 1024,2048,4096 \
    --max-f32 4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X pf0 pf1 >$X/summary.txt 2>&1
cat $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && cp $X/summary.txt ${OUT:-/tmp/out}/earlypf_summary.txt
