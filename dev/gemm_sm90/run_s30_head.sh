#!/usr/bin/env bash
# Session 30: the grouped launch's epilogue head (the scale and flags of cml__sm90_head) worked out by the producer and
# handed over in the tile slots (ehead) against the consumers working it out at each tile's end (prev: 208c280's
# kernel). The final tree's timelines showed a tile right after a problem switch ~800 cycles longer in its epilogue.
# test_gpu_gemm whole; test_grouped under the sanitizers; the grouped set in turns.
#   run(carry=["build-s30x"], command="XDIR=build-s30x bash dev/gemm_sm90/run_s30_head.sh; tar czf $OUT/r.tgz -C /tmp/x .")
set -u
XDIR=${XDIR:-build-s30x}
. "$(dirname "$0")/../carried.sh"
unpack
run_tests gemm
TOOLS="memcheck racecheck synccheck" sanitize /tmp/bin/test_gpu_gemm test_grouped
tests_summary
in_turns ${ROUNDS:-4} "prev ehead" bench gemm --dtype bf16,fp16,tf32,e4m3 --set grouped --reps 20
python3 dev/gemm_sm90/s20_summary.py $X prev ehead >$X/summary.txt 2>&1
cat $X/summary.txt
for v in prev ehead; do echo "== $v"; grep -h "per-problem" $X/bench_${v}_*.txt | sort | uniq -c; done
