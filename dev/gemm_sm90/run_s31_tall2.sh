#!/usr/bin/env bash
# Session 31: the tall tile with its whole 64 x 160 half staged at once (ceil(BN / 64) epilogue buffers). Its forced
# test, `camel tune gemm` over the odd set (bf16, fp16), timelines of the odd set at 128 x 256 (the estimate) and forced
# 256 x 160 in clusters of 2 (tl_phases.py: where a CTA's life goes), then the whole test_gpu_gemm and
# compute-sanitizer on the tall test.
#   run(carry=["build-s31x"], command="XDIR=build-s31x bash dev/gemm_sm90/run_s31_tall2.sh")
set -u
XDIR=${XDIR:-build-s31x}
X=${OUT:-/tmp}/x
. "$(dirname "$0")/../carried.sh"
unpack camel-tall2 camel-tl test_gpu_gemm-tall
mv /tmp/bin/test_gpu_gemm-tall /tmp/bin/test_gpu_gemm
CML_TEST_ONLY=test_sm90_tall timeout 120 /tmp/bin/test_gpu_gemm >$X/test_tall_only.log 2>&1
echo "rc $?" >>$X/test_tall_only.log
stamp "tall test: $(tail -1 $X/test_tall_only.log)"
timeout 300 /tmp/bin/camel-tall2 tune gemm --dtype bf16,fp16 --set odd --reps 20 --json $X/tune_odd.json \
    --out $X/run_odd.inc 2>&1 | grep -v "tune gemm \[" >$X/tune_odd.txt
stamp "tune odd done"
for v in est:none tall:256,160,1,2,8,0,0; do
    n=${v%%:*} f=${v#*:}
    mkdir -p /tmp/tl_$n
    CML_SM90_DEV_FORCE_ANY=$([ $f = none ] || echo $f) CML_SM90_TL_DIR=/tmp/tl_$n timeout 100 \
        /tmp/bin/camel-tl bench gemm --dtype bf16 --set odd --reps 3 >$X/tlbench_$n.txt 2>&1
    stamp "timelines $n rc $?"
    python3 dev/gemm_sm90/tl_phases.py /tmp/tl_$n/*.txt >$X/tl_phases_$n.txt 2>&1
done
run_tests gemm &
sanitize /tmp/bin/test_gpu_gemm test_sm90_tall
wait
tests_summary
tail -4 $X/test_tall_only.log
cat $X/tune_odd.txt | head -8
cat $X/tl_phases_*.txt
