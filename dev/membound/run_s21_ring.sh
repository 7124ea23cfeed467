#!/usr/bin/env bash
# Session 21: nbr_kernel with the group's next two rows in flight (a ring of two cp.async stages in shared memory)
# instead of one row ahead in registers. Binaries built locally (90a-real, stripped, xz) in build-s21x/: camel-prev
# (01487a5), camel-ring and the two norm tests (this change: s21_nbr_ring.patch; refuted, not in the library).
# Steps: test_gpu_layernorm / rmsnorm whole; memcheck / racecheck / synccheck of test_row_groups, test_partial_phases,
# test_affine_variants; camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both, prev / ring in turns,
# ROUNDS rounds; the summary last.
#   XDIR=build-s21x bash dev/membound/run_s21_ring.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s21x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
run_tests layernorm rmsnorm
TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_row_groups test_partial_phases test_affine_variants &
TAG=rms_ sanitize /tmp/bin/test_gpu_rmsnorm test_row_groups test_partial_phases test_no_gamma &
wait
tests_summary
in_turns ${ROUNDS:-3} "prev ring" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X prev >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
