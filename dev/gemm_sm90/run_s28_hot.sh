#!/usr/bin/env bash
# Session 28, an upper bound: camel-hot has the split-K hand-off and the register epilogue compiled out (every launch
# stores by TMA; the split-K row, attn_proj dW, computes garbage there and is flagged), so the consumers' path from the
# main loop to the TMA epilogue holds no jump over cold code. Timelines tlhead / tlhot, then camel-head (the tree)
# against camel-hot in turns.
#   XDIR=build-s28x bash dev/gemm_sm90/run_s28_hot.sh   (carry build-s28x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-head camel-hot camel-tlhead camel-tlhot
for r in 1 2; do
    for v in tlhead tlhot; do
        for s in "square --sizes 1024,2048" "gpt2"; do
            n=${s%% *}
            mkdir -p $X/${v}_${n}_$r
            CML_SM90_TL_SEQ=1 CML_SM90_TL_DIR=$X/${v}_${n}_$r timeout 100 /tmp/bin/camel-$v bench gemm --dtype bf16 \
                --set $s --reps 3 >$X/tlbench_${v}_${n}_$r.txt 2>&1
        done
    done
    stamp "timelines round $r"
done
{
    for p in "square tl_1024x1024x1024_NN" "square tl_2048x2048x2048_NN" "gpt2 tl_8192x768x768_NT" \
        "gpt2 tl_8192x768x3072_NN" "gpt2 tl_3072x768x8192_TN"; do
        set -- $p
        for r in 1 2; do
            for v in tlhead tlhot; do
                f=$(ls $X/${v}_${1}_$r/${2}_*.txt | tail -1) # the last launch: after the bench's L2 flush
                echo "== $v round $r $(basename $f)"; python3 dev/gemm_sm90/startup_parts.py $f; python3 dev/gemm_sm90/timeline.py $f
            done
        done
    done
} >$X/timelines.txt 2>&1
in_turns ${ROUNDS:-8} "head hot" bench gemm --dtype bf16,fp16 --set square,gpt2 --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X head hot >$X/summary.txt 2>&1
cat $X/stages.txt; grep -v "^    14 \|slot  ctas\|CTA ends\|^/tmp\|ramp" $X/timelines.txt | grep -v "^     [1-9] " ; cat $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s28_hot.tgz -C $X --exclude='*_square_*' --exclude='*_gpt2_*' .
