#!/usr/bin/env bash
# Session 23: the tf32 rows re-tuned with the 128-row ping-pong (camel-tf) against the library before (camel-noearly:
# the committed tree's library), camel bench gemm tf32 (+ bf16 as a control) in turns, ROUNDS rounds (default 3).
#   XDIR=build-s23x bash dev/gemm_sm90/run_s23_tf32.sh   (carry build-s23x)
set -u
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
unpack camel-tf camel-noearly
in_turns $ROUNDS "noearly tf" bench gemm --dtype tf32,bf16 --set gpt2,square --sizes 2048,4096,8192 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X noearly tf >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
