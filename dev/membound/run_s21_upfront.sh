#!/usr/bin/env bash
# Session 21: the 32-phase partial sum (norm_bwd_partial.cuh) with a phase's rows (up to 9: 288 partial rows) loaded
# at once, then added in the same order (the same bits): one round of loads instead of two or three. Binaries built
# locally (90a-real, stripped, xz) in build-s21x/: camel-prev (1eda7ac, the same kernels as 2178a22), camel-uf and the
# two norm tests (this change: s21_psum_upfront32.patch; refuted, not in the library).
# Steps: test_gpu_layernorm / rmsnorm whole; memcheck / racecheck / synccheck of test_partial_phases and
# test_row_groups; camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both, prev / uf in turns, ROUNDS
# rounds; the summary last.
#   XDIR=build-s21x bash dev/membound/run_s21_upfront.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s21x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
run_tests layernorm rmsnorm
TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_partial_phases test_row_groups &
TAG=rms_ sanitize /tmp/bin/test_gpu_rmsnorm test_partial_phases test_row_groups &
wait
tests_summary
in_turns ${ROUNDS:-3} "prev uf" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X prev >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
