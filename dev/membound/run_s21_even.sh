#!/usr/bin/env bash
# Session 21: the tree to commit -- 32 partial-sum phases from 128 partial rows on, and nbr_kernel's groups with named
# barriers all running the block's number of rounds (racecheck: dev/membound/named_barrier_racecheck.cu). Binaries
# built locally (90a-real, stripped, xz) in build-s21x/: camel-head (93fcd64), camel-new and the two norm tests.
# Steps: test_gpu_layernorm / rmsnorm whole; memcheck / racecheck / synccheck of test_partial_phases and
# test_row_groups (register rows with unequal row counts a group); camel bench membound --ops
# layernorm_bwd,rmsnorm_bwd --mode both, head / new in turns, ROUNDS rounds; the summary last.
#   XDIR=build-s21x bash dev/membound/run_s21_even.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s21x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
run_tests layernorm rmsnorm
TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_partial_phases test_row_groups &
TAG=rms_ sanitize /tmp/bin/test_gpu_rmsnorm test_partial_phases test_row_groups &
wait
tests_summary
in_turns ${ROUNDS:-3} "head new" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X head >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
