#!/usr/bin/env bash
# Session 20: re-tune the 16-bit table now that cluster 2 no longer pays ~1.4 us a launch (camel tune gemm: every
# valid configuration, then the finalists and cuBLASLt in turns). Binary: camel-head (5079259, built locally for
# 90a-real, stripped, xz) in build-s20x/. Merge the run into the table with dev/gemm_sm90/tuned_merge.py.
#   bash dev/gemm_sm90/run_s20_retune.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s20x; timeout_s 600)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-head
timeout 400 /tmp/bin/camel-head tune gemm --dtype bf16,fp16 --set square,gpt2 --sizes 1024,2048,4096,8192 --ops NN \
    --out $X/run.inc --json $X/run.json >$X/tune.txt 2>&1
stamp "tune rc $?"
grep -v 'tune gemm \[' $X/tune.txt | tail -45
