#!/usr/bin/env bash
# Session 22: LayerNorm's dx as two FMAs, r g + (-r mg) then + xh (-r mgx), instead of r ((g - mg) - xh mgx)
# (s22_dx_fma.patch: nbw_kernel and nbs_kernel; one instruction less an element, other rounding), for the bf16 shapes
# under the line (nbw issues at 58% with warps not selected). camel-final = 9907e51's source, camel-fma = + the patch;
# test_gpu_layernorm of the patch (CPU float64 comparison, repeats). Built locally (build-s22x/).
#   XDIR=build-s22x bash dev/membound/run_s22_fma.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
run_tests layernorm
tests_summary
in_turns ${ROUNDS:-3} "final fma" bench membound --ops layernorm_bwd --mode both
python3 dev/membound/ab_summary.py $X final >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
