#!/usr/bin/env bash
# Session 29: the balanced persistent grid (the fewest clusters that keep the rounds: gemm_sm90.cu balanced_grid)
# against the grid before (CML_SM90_GRID=full), one binary, in turns over the batched, square and GPT-2 sets (bf16,
# fp16; batched also tf32, e4m3); test_gpu_gemm whole first. Binaries built locally into build-s29x/.
#   run(carry=["build-s29x"], command="XDIR=build-s29x bash dev/gemm_sm90/run_s29_grid.sh")
set -u
XDIR=${XDIR:-build-s29x}
. "$(dirname "$0")/../carried.sh"
unpack camel-grid test_gpu_gemm
printf '#!/bin/sh\nCML_SM90_GRID=full exec /tmp/bin/camel-grid "$@"\n' >/tmp/bin/camel-full
printf '#!/bin/sh\nexec /tmp/bin/camel-grid "$@"\n' >/tmp/bin/camel-bal
chmod +x /tmp/bin/camel-full /tmp/bin/camel-bal
run_tests gemm
tests_summary
in_turns ${ROUNDS:-4} "full bal" bench gemm --dtype bf16,fp16 --set batched,square,gpt2 --sizes 1024,2048,4096,8192,16384 \
    --reps 20
for v in full bal; do
    timeout 100 /tmp/bin/camel-$v bench gemm --dtype tf32,e4m3 --set batched,grouped --reps 20 >$X/other_$v.txt 2>&1
done
python3 dev/gemm_sm90/s20_summary.py $X full bal >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
grep -h "per-problem" $X/bench_*_4.txt $X/other_*.txt
cp -r $X/. ${OUT:-/tmp/out}/
