#!/usr/bin/env bash
# Session 21: dgamma / dbeta summed in the first kernel's tail (norm_bwd_tail.cuh) for the register-row (nbr),
# wide-row (nbw) and long-row (nbl) kernels, instead of the second kernel. Binaries built locally (90a-real,
# stripped, xz) in build-s21x/: camel-head (93fcd64, the code before), camel-tail and the two norm tests (this
# change; camel-off = camel-tail with CML_NORM_BWD_TAIL=0, the second kernel again). The source is s21_tail.patch
# (its second form; the first had every CTA wait and sum and 8-16 rows a thread).
# Steps: test_gpu_layernorm / rmsnorm whole; memcheck / racecheck / synccheck of their test_tail_rows; camel bench
# membound --ops layernorm_bwd,rmsnorm_bwd --mode both, head / off / tail in turns, ROUNDS rounds; the summary last.
#   XDIR=build-s21x bash dev/membound/run_s21_tail.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s21x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
printf '#!/bin/sh\nCML_NORM_BWD_TAIL=0 exec /tmp/bin/camel-tail "$@"\n' >/tmp/bin/camel-off && chmod +x /tmp/bin/camel-off
run_tests layernorm rmsnorm
TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_tail_rows &
TAG=rms_ sanitize /tmp/bin/test_gpu_rmsnorm test_tail_rows &
# control: racecheck of the register rows (test_affine_variants: 64 x 1024) with the tail on (default) and off
for m in 1 0; do
    (CML_NORM_BWD_TAIL=$m CML_TEST_ONLY=test_affine_variants CML_TEST_SANITIZER=1 timeout 200 compute-sanitizer \
        --tool racecheck --error-exitcode 99 --report-api-errors no /tmp/bin/test_gpu_layernorm \
        >$X/san_racecheck_affine_tail$m.log 2>&1; echo "rc $?" >>$X/san_racecheck_affine_tail$m.log) &
done
wait
tests_summary
in_turns ${ROUNDS:-3} "head off tail" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X head >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
