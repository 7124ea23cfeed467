#!/usr/bin/env bash
# Session 23: the 128-row ping-pong schedule as a plan option (cml__gemm_sm90_config.pingpong): test_gpu_gemm whole,
# compute-sanitizer memcheck / racecheck / synccheck of test_sm90_pingpong, then `camel tune gemm` over the bf16 and
# fp16 GPT-2 set (every configuration, the ping-pong ones included) into $X/run.inc + run.json for tuned_merge.py.
# (second use: CAMEL=tf DTYPES=tf32, the tf32 ping-pong.)
#   XDIR=build-s23x bash dev/gemm_sm90/run_s23_tune.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s23x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-${CAMEL:-new} test_gpu_gemm
run_tests gemm
sanitize /tmp/bin/test_gpu_gemm test_sm90_pingpong
tests_summary
timeout ${TUNE_S:-330} /tmp/bin/camel-${CAMEL:-new} tune gemm --dtype ${DTYPES:-bf16,fp16} --set gpt2 --out $X/run.inc \
    --json $X/run.json >$X/tune.txt 2>&1
stamp "tune rc $?"
grep -v 'tune gemm \[' $X/tune.txt | tail -40
