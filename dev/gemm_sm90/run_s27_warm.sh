#!/usr/bin/env bash
# Session 27: the consumers load the parameters of the producer's first tile and of the epilogue into the constant
# cache while they wait for their first stage (CML_SM90_DEV_WARM). Timelines (tl: the tree, tlwarm: with it; every
# launch its own file) of 1024^3 and the bf16 GPT-2 set -- tile 0's epilogue and the first tile's location -- then
# camel-fd (the tree) against camel-warm in turns over the 16-bit squares 1024-4096 and GPT-2 set.
#   XDIR=build-s27x bash dev/gemm_sm90/run_s27_warm.sh   (carry build-s27x)
set -u
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
unpack camel-fd camel-warm camel-tl camel-tlwarm
for v in tl tlwarm; do
    for s in "square --sizes 1024" "gpt2"; do
        n=${s%% *}
        mkdir -p $X/${v}_$n
        CML_SM90_TL_SEQ=1 CML_SM90_TL_DIR=$X/${v}_$n timeout 100 /tmp/bin/camel-$v bench gemm --dtype bf16 --set $s \
            --reps 3 >$X/tlbench_${v}_$n.txt 2>&1
        stamp "timeline $v $n rc $?"
    done
done
{
    for v in tl tlwarm; do
        for f in $(ls $X/${v}_square/tl_*.txt | tail -1) $(ls $X/${v}_gpt2/tl_8192x768x768_NT_*.txt | tail -1) \
            $(ls $X/${v}_gpt2/tl_8192x768x3072_NN_*.txt | tail -1) $(ls $X/${v}_gpt2/tl_3072x768x8192_TN_*.txt | tail -1); do
            echo "== $v $(basename $f)"; python3 dev/gemm_sm90/startup_parts.py $f; python3 dev/gemm_sm90/timeline.py $f
        done
    done
} >$X/timelines.txt 2>&1
in_turns $ROUNDS "fd warm" bench gemm --dtype bf16,fp16 --set square,gpt2 --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X fd warm >$X/summary.txt 2>&1
cat $X/stages.txt $X/timelines.txt $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s27_warm.tgz -C $X .
