#!/usr/bin/env bash
# Session 24: a new plan option (stream-K, s24_stream_k.patch; the 160-wide tile, s24_wide160.patch, with
# SAN_TEST=test_sm90_wide160 SETS=gpt2): test_gpu_gemm whole, compute-sanitizer memcheck / racecheck / synccheck of
# $SAN_TEST, then `camel tune gemm` over the GPT-2 set and the squares (every configuration, the new ones included)
# into $X/run.inc + run.json for tuned_merge.py.
#   XDIR=build-s24x bash dev/gemm_sm90/run_s24_sk.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s24x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-${CAMEL:-new} test_gpu_gemm
run_tests gemm
sanitize /tmp/bin/test_gpu_gemm ${SAN_TEST:-test_sm90_stream_k}
tests_summary
timeout ${TUNE_S:-300} /tmp/bin/camel-${CAMEL:-new} tune gemm --dtype ${DTYPES:-bf16,fp16} --set ${SETS:-gpt2,square} \
    --sizes ${SIZES:-2048,4096,8192} --out $X/run.inc --json $X/run.json >$X/tune.txt 2>&1
stamp "tune rc $?"
grep -v 'tune gemm \[' $X/tune.txt | tail -50
