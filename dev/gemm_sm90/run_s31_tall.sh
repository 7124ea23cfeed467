#!/usr/bin/env bash
# Session 31: the tall 256 x 160 tile (gemm_sm90_kernel.cuh CML_SM90_TALL). Its forced test first, then `camel tune
# gemm` over the odd set (every configuration, the tall one among them; nothing else runs meanwhile), then the whole
# test_gpu_gemm and compute-sanitizer on the tall test.
#   run(carry=["build-s31x"], command="XDIR=build-s31x bash dev/gemm_sm90/run_s31_tall.sh")
set -u
XDIR=${XDIR:-build-s31x}
X=${OUT:-/tmp}/x
. "$(dirname "$0")/../carried.sh"
unpack camel-tall test_gpu_gemm-tall
mv /tmp/bin/test_gpu_gemm-tall /tmp/bin/test_gpu_gemm
CML_TEST_ONLY=test_sm90_tall timeout 120 /tmp/bin/test_gpu_gemm >$X/test_tall_only.log 2>&1
echo "rc $?" >>$X/test_tall_only.log
stamp "tall test: $(tail -1 $X/test_tall_only.log)"
timeout 300 /tmp/bin/camel-tall tune gemm --dtype bf16,fp16 --set odd --reps 20 --json $X/tune_odd.json \
    --out $X/run_odd.inc 2>&1 | grep -v "tune gemm \[" >$X/tune_odd.txt
stamp "tune odd done"
run_tests gemm &
sanitize /tmp/bin/test_gpu_gemm test_sm90_tall
wait
tests_summary
cat $X/test_tall_only.log | tail -8
cat $X/tune_odd.txt
