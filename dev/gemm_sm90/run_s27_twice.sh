#!/usr/bin/env bash
# Session 27: is a launch's start-up (~1300 clocks to the first tile's location) and its first tile's slow epilogue
# the code arriving (instruction fetch) or the work? camel-tl2 (the timeline build with CML_SM90_TL_TWICE: each
# launch preceded by the same launch back to back) records the second of each pair; compared with single launches.
# Also bf16 against fp16 at 2048^3 (fp16 read 0.935-0.943 of cuBLASLt, bf16 0.97-1.01).
#   XDIR=build-s27x bash dev/gemm_sm90/run_s27_twice.sh   (carry build-s27x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-tl2
for v in once twice; do
    for s in "square --sizes 1024,2048" "gpt2"; do
        n=${s%% *}
        mkdir -p $X/${v}_$n
        ([ $v = twice ] && export CML_SM90_TL_TWICE=1; CML_SM90_TL_SEQ=1 CML_SM90_TL_DIR=$X/${v}_$n timeout 100 \
            /tmp/bin/camel-tl2 bench gemm --dtype bf16,fp16 --set $s --reps 3 >$X/tlbench_${v}_$n.txt 2>&1)
        stamp "timeline $v $n rc $?"
    done
done
{
    for v in once twice; do
        for p in "${v}_square/tl_1024x1024x1024_NN" "${v}_square/tl_2048x2048x2048_NN" "${v}_gpt2/tl_8192x768x768_NT" \
            "${v}_gpt2/tl_8192x768x3072_NN" "${v}_gpt2/tl_3072x768x8192_TN"; do
            # the last bf16 launch of the shape and the last fp16 one (the bench runs bf16 first)
            fs=$(ls $X/${p}_*.txt); n=$(echo "$fs" | wc -l)
            for f in $(echo "$fs" | sed -n "$((n / 2))p;${n}p"); do
                echo "== $v $(basename $f)"; python3 dev/gemm_sm90/startup_parts.py $f; python3 dev/gemm_sm90/timeline.py $f
            done
        done
    done
} >$X/timelines.txt 2>&1
cat $X/stages.txt; grep -v "^    14 \|slot  ctas\|CTA ends" $X/timelines.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s27_twice.tgz -C $X .
