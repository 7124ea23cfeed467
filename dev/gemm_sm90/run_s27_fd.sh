#!/usr/bin/env bash
# Session 27: the first tile located by multiplies (cml__sm90_div) instead of integer divisions. test_gpu_gemm whole,
# memcheck of test_split_k / test_sm90_configs, the start-up in parts (camel-tl: this tree's timeline build), then
# camel-base (the tree before) against camel-fd in turns over the bf16 / fp16 squares 1024-4096 and GPT-2 set.
#   XDIR=build-s27x bash dev/gemm_sm90/run_s27_fd.sh   (carry build-s27x)
set -u
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
unpack camel-base camel-fd camel-tl test_gpu_gemm
run_tests gemm
TOOLS="memcheck" sanitize /tmp/bin/test_gpu_gemm test_split_k test_sm90_configs
tests_summary
for s in "square --sizes 1024" "gpt2"; do
    n=${s%% *}
    mkdir -p $X/tl_$n
    CML_SM90_TL_SEQ=1 CML_SM90_TL_DIR=$X/tl_$n timeout 100 /tmp/bin/camel-tl bench gemm --dtype bf16 --set $s --reps 3 >$X/tlbench_$n.txt 2>&1
    stamp "timeline $n rc $?"
done
{ # launch 2: a warm-up (back to back after cuBLASLt's); the last: after the bench's L2 flush
    for f in $X/tl_square/tl_*_0002.txt $(ls $X/tl_square/tl_*.txt | tail -1) $(ls $X/tl_gpt2/tl_8192x768x768_NT_*.txt | sed -n '3p;$p'); do
        echo "== $(basename $f)"; python3 dev/gemm_sm90/startup_parts.py $f; python3 dev/gemm_sm90/timeline.py $f
    done
} >$X/startup.txt 2>&1
in_turns $ROUNDS "base fd" bench gemm --dtype bf16,fp16 --set square,gpt2 --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X base fd >$X/summary.txt 2>&1
cat $X/stages.txt $X/startup.txt $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s27_fd.tgz -C $X .
