#!/usr/bin/env bash
# Session 23 (ran on an intermediate tree: the environment switch CML_SM90_PP2 it sets was replaced by the plan field
# cml__gemm_sm90_config.pingpong before the commit; kept as the record of dev/gemm_sm90/README.md's step 2):
# the 128 x 128 ping-pong kernel (gemm_sm90_kernel.cuh PINGPONG = 2, switched on by CML_SM90_PP2=1 in
# camel-new) against the library's plans (camel-new without it; camel-base = the tree before the kernel change):
# test_gpu_gemm with the switch at 1 (every unsplit 16-bit launch of 128-row tiles runs it, 128 wide) and 2 (the
# 192-wide plans run it 192 wide), racecheck / memcheck of both on test_sm90_configs, then camel bench gemm (bf16 + fp16, GPT-2 and
# squares 2048-8192) in turns, ROUNDS rounds. Carry build-s23x.
set -u
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/../carried.sh"
unpack camel-new camel-base test_gpu_gemm
for m in 1 2; do
    printf '#!/bin/sh\nCML_SM90_PP2=%s exec /tmp/bin/camel-new "$@"\n' $m >/tmp/bin/camel-pp$m && chmod +x /tmp/bin/camel-pp$m
    (CML_SM90_PP2=$m timeout 250 /tmp/bin/test_gpu_gemm >$X/test_pp$m.log 2>&1; echo "rc $?" >>$X/test_pp$m.log) &
done
wait
stamp "tests done"
for m in 1 2; do
    CML_SM90_PP2=$m TOOLS="racecheck memcheck" TAG=pp${m}_ sanitize /tmp/bin/test_gpu_gemm test_sm90_configs
done
tests_summary
in_turns $ROUNDS "${VARIANTS:-base pp1 pp2}" bench gemm --dtype bf16,fp16 --set gpt2,square --sizes 2048,4096,8192 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X ${VARIANTS:-base pp1 pp2} >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
