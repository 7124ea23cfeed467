#!/usr/bin/env bash
# Session 30: `camel tune gemm` over the batched set for tf32 and e4m3 (session 28 tuned only bf16 / fp16 there): is
# there a tile configuration for 64 x 1024^3 (or its stacked GEMM) that beats the estimate's 128 x 256 in clusters of 2?
#   run(carry=["build-s30x"], command="XDIR=build-s30x bash dev/gemm_sm90/run_s30_tune.sh")
set -u
XDIR=${XDIR:-build-s30x}
. "$(dirname "$0")/../carried.sh"
unpack camel-final
timeout 500 /tmp/bin/camel-final tune gemm --dtype tf32,e4m3 --set batched --reps 20 --json ${OUT:-/tmp}/tune_s30.json \
    --out ${OUT:-/tmp}/run_s30.inc 2>&1 | grep -v "tune gemm \[" | tee ${OUT:-/tmp}/tune_s30.txt
