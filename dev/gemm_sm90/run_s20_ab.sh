#!/usr/bin/env bash
# Session 20: camel bench gemm (bf16, GPT-2 set + squares 1024-4096) with the variants that s20_variants.sh built
# (carried in build-s20x/), in turns, ROUNDS rounds (default 3): old = the library before session 20 (a CTA's last
# wait for its TMA stores waits for their writes), new = that wait for their reads of shared memory only, early =
# new + a consumer that frees the k-block before's stage while it waits for a late stage (CML_SM90_DEV_EARLY).
# Summary last: per case median ms and each variant's speed over old, GPT-2 geomeans.
#   bash dev/gemm_sm90/run_s20_ab.sh; tar czf $OUT/logs.tgz -C /tmp/x .     (carry build-s20x; timeout_s 600)
set -u
V=${VARIANTS:-old new early} ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
unpack $(for v in $V; do echo camel-$v; done)
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >$X/gpu.txt 2>&1
in_turns $ROUNDS "$V" bench gemm --dtype bf16 --set gpt2,square --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X $V >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
