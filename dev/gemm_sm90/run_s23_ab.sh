#!/usr/bin/env bash
# Session 23: the tuned table with the 128-row ping-pong rows (camel-new) against the tree before this session
# (camel-base), camel bench gemm in turns (bf16 + fp16, GPT-2 set + squares 2048-8192), ROUNDS rounds (default 3);
# summary by s20_summary.py.   XDIR=build-s23x bash dev/gemm_sm90/run_s23_ab.sh   (carry build-s23x)
# The tf32 step: VARIANTS="noearly tf" DTYPES=tf32,bf16 (camel-noearly: the library before it, camel-tf: after).
set -u
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
V=${VARIANTS:-base new}
unpack $(for v in $V; do echo camel-$v; done)
in_turns $ROUNDS "$V" bench gemm --dtype ${DTYPES:-bf16,fp16} --set gpt2,square --sizes 2048,4096,8192 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X $V >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
