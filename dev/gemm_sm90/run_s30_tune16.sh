#!/usr/bin/env bash
# Session 30: `camel tune gemm` over fp16 (the dtype whose per-shape line sits at 0.955-0.958: 1024^3, attn_proj fwd,
# mlp_proj dW) and bf16, squares 1024 / 2048 and the GPT-2 set, on the final tree (the early first loads of session 29
# changed single-CTA launches since the table's rows were tuned).
#   run(carry=["build-s30x"], command="XDIR=build-s30x bash dev/gemm_sm90/run_s30_tune16.sh")
set -u
XDIR=${XDIR:-build-s30x}
. "$(dirname "$0")/../carried.sh"
unpack camel-final
timeout 560 /tmp/bin/camel-final tune gemm --dtype fp16,bf16 --set square,gpt2 --sizes 1024,2048 --reps 20 \
    --json ${OUT:-/tmp}/tune16_s30.json --out ${OUT:-/tmp}/run16_s30.inc 2>&1 | grep -v "tune gemm \[" |
    tee ${OUT:-/tmp}/tune16_s30.txt
