#!/usr/bin/env bash
# Session 27: (1) a GEMM CTA's start-up with and without the bench's L2 flush (timeline build, every launch its own
# file: CML_SM90_TL_SEQ): the warm-up launches run back to back after cuBLASLt's, the timed ones after a 256 MiB
# memset -- are the ~1500 clocks before the first load the code's / parameters' misses or the arithmetic?
# (2) 64-row tiles with 8 stages instead of 6 (camel-s8) against camel-base in turns, 1024^3, and the tuner's view.
# camel-s8 was built from the session's tree with -DCML_SM90_PP64_STAGES=8, a switch of sm90_run_tile since removed
# (refuted: s27_results/s8_summary.txt).
#   XDIR=build-s27x bash dev/gemm_sm90/run_s27_s8.sh   (carry build-s27x: camel-base, camel-s8, camel-tl)
set -u
ROUNDS=${ROUNDS:-4}
. "$(dirname "$0")/../carried.sh"
unpack camel-base camel-s8 camel-tl
for s in "square --sizes 1024" "gpt2"; do
    n=${s%% *}
    mkdir -p $X/tl_$n
    CML_SM90_TL_SEQ=1 CML_SM90_TL_DIR=$X/tl_$n timeout 100 /tmp/bin/camel-tl bench gemm --dtype bf16 --set $s \
        --reps 3 >$X/tlbench_$n.txt 2>&1
    stamp "timeline $n rc $?"
done
{
    for f in $X/tl_square/tl_*.txt; do echo "== $(basename $f)"; python3 dev/gemm_sm90/startup_parts.py $f; done
    for sh in 2304x768x8192_TN 8192x768x768_NT; do
        for f in $(ls $X/tl_gpt2/tl_${sh}_*.txt); do echo "== $(basename $f)"; python3 dev/gemm_sm90/startup_parts.py $f; done
    done
    for f in $(ls $X/tl_square/tl_*.txt | sed -n '4p;$p'); do python3 dev/gemm_sm90/timeline.py $f; done
} >$X/startup.txt 2>&1
in_turns $ROUNDS "base s8" bench gemm --dtype bf16,fp16 --set square --sizes 1024 --reps 40
python3 dev/gemm_sm90/s20_summary.py $X base s8 >$X/summary.txt 2>&1
timeout 60 /tmp/bin/camel-s8 tune gemm --dtype bf16,fp16 --set square \
    --sizes 1024 --reps 40 >$X/tune_s8.txt 2>&1
stamp "tune s8 rc $?"
cat $X/stages.txt $X/startup.txt $X/summary.txt; grep -A8 "estimate\|best" $X/tune_s8.txt | head -30
mkdir -p ${OUT:-/tmp/out} && cp $X/*.txt ${OUT:-/tmp/out}/
