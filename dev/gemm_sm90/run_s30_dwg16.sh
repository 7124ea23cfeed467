#!/usr/bin/env bash
# Session 30: fp16 / bf16 mlp_proj dW (768 x 3072 x 8192 TN) in its table's plan (128 x 160, 2 x 2 clusters, group 8)
# against group 16 (the re-tune's best for fp16, 1.5%: under the table's 2% rule), one dev binary
# (-DCML_SM90_DEV_FORCE_ANY=1: the force applies to every problem it is valid for, here the GPT-2 weight gradients),
# in turns over the GPT-2 set.
#   run(carry=["build-s30x"], command="XDIR=build-s30x bash dev/gemm_sm90/run_s30_dwg16.sh")
set -u
XDIR=${XDIR:-build-s30x}
. "$(dirname "$0")/../carried.sh"
unpack camel-force
printf '#!/bin/sh\nexec /tmp/bin/camel-force "$@"\n' >/tmp/bin/camel-g8
printf '#!/bin/sh\nCML_SM90_DEV_FORCE_ANY=128,160,1,4,16,0,2 exec /tmp/bin/camel-force "$@"\n' >/tmp/bin/camel-g16
chmod +x /tmp/bin/camel-g8 /tmp/bin/camel-g16
in_turns ${ROUNDS:-6} "g8 g16" bench gemm --dtype fp16,bf16 --set gpt2 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X g8 g16 | grep -i "dw\|geomean"
