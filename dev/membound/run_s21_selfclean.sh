#!/usr/bin/env bash
# Session 21: the one-pass long-row kernels (LayerNorm / RMSNorm forward, softmax forward / backward, cross-entropy
# backward) keep their row-sync words in the context's zeroed words and hand them back 0 (common/row_sync.cuh:
# cml__row_release_*), so that no reset runs before the call; nbl_kernel keeps the reset kernel (now writing 0).
# Binaries built locally (90a-real, stripped, xz) in build-s21x/: camel-prev (1eda7ac: the PDL reset kernel),
# camel-sc and the tests (this change: s21_row_sync_selfclean.patch; refuted, not in the library).
# Steps: test_gpu_layernorm / rmsnorm / softmax / pdl_chain whole; memcheck / racecheck / synccheck of
# test_gpu_pdl_chain and of test_gpu_softmax's test_cross_entropy; camel bench membound (the row-sync ops and the
# norm backward), prev / sc in turns, ROUNDS rounds; the summary last.
#   XDIR=build-s21x bash dev/membound/run_s21_selfclean.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s21x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
run_tests layernorm rmsnorm softmax pdl_chain
sanitize /tmp/bin/test_gpu_pdl_chain &
TAG=sm_ sanitize /tmp/bin/test_gpu_softmax test_cross_entropy test_softmax_rows &
wait
tests_summary
in_turns ${ROUNDS:-3} "prev sc" bench membound \
    --ops layernorm,rmsnorm,softmax,softmax_bwd,cross_entropy_bwd,layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X prev >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
