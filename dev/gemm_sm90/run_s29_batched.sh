#!/usr/bin/env bash
# Session 29: the batched set's new "as one" (the same problems as one 65536 x 1024 x 1024 GEMM, A's stacked) next to
# the old one of the same flops (8192 x 8192 x 1024), every dtype, 3 runs; grouped alongside. Binary: build-s29x/.
#   run(carry=["build-s29x"], command="XDIR=build-s29x bash dev/gemm_sm90/run_s29_batched.sh")
XDIR=${XDIR:-build-s29x}
source dev/carried.sh
unpack camel-bench
for r in 1 2 3; do
    timeout 150 /tmp/bin/camel-bench bench gemm --dtype bf16,fp16,tf32,e4m3 --set batched,grouped --reps 20 \
        --json $X/batched_$r.json --commit s29-bench >$X/batched_$r.txt 2>&1
    stamp "round $r rc $?"
done
timeout 200 /tmp/bin/camel-bench bench gemm --dtype f32 --set batched,grouped --reps 20 --json $X/batched_f32.json \
    --commit s29-bench >$X/batched_f32.txt 2>&1
stamp "f32 rc $?"
grep -h "per-problem" $X/batched_*.txt
cp -r $X/. ${OUT:-/tmp/out}/
