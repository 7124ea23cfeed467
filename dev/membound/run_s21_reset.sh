#!/usr/bin/env bash
# Session 21: the row-sync reset as a PDL kernel (common/row_sync.cuh) instead of cudaMemsetAsync, for every one-pass
# long-row kernel (LayerNorm / RMSNorm forward, softmax, cross-entropy, nbl_kernel's rows of several chunks).
# Binaries built locally (90a-real, stripped, xz) in build-s21x/: camel-m2 (6e89ee2 + the timing switch of
# s21_memset2.patch, off here: the code before), camel-rs and the tests (this change).
# Steps: test_gpu_layernorm / rmsnorm / softmax / pdl_chain whole; memcheck / racecheck / synccheck of test_gpu_pdl_chain
# and of test_gpu_layernorm's test_shapes (2 x 262144: the one-pass forward and nbl); camel bench membound (the
# row-sync ops and the norm backward), before / after in turns, ROUNDS rounds; the summary last.
#   XDIR=build-s21x bash dev/membound/run_s21_reset.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s21x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
printf '#!/bin/sh\nexec /tmp/bin/camel-m2 "$@"\n' >/tmp/bin/camel-before && chmod +x /tmp/bin/camel-before
run_tests layernorm rmsnorm softmax pdl_chain
sanitize /tmp/bin/test_gpu_pdl_chain &
TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_shapes &
wait
tests_summary
in_turns ${ROUNDS:-3} "before rs" bench membound --ops layernorm,rmsnorm,softmax,cross_entropy,layernorm_bwd,rmsnorm_bwd \
    --mode both
python3 dev/membound/ab_summary.py $X before >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
