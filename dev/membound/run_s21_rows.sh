#!/usr/bin/env bash
# Session 21: nbr_kernel (groups of 64+ threads) and nbw_kernel take their rows as y gridDim.x + blockIdx.x + k step
# instead of blockIdx.x R + y + k step, so that the SMs' row counts differ by at most one (4096 rows on 132 SMs: 31 or
# 32, where the consecutive rows left 16 / 32 SMs 8 / 4 rows short). Binaries built locally (90a-real, stripped, xz)
# in build-s21x/: camel-prev (c02ce49), camel-rr and the two norm tests (this change: s21_rows_interleaved.patch;
# refuted, not in the library).
# Steps: test_gpu_layernorm / rmsnorm whole; memcheck / racecheck / synccheck of test_row_groups, test_wide_rows,
# test_partial_phases; camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both, prev / rr in turns, ROUNDS
# rounds; the summary last.
#   XDIR=build-s21x bash dev/membound/run_s21_rows.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s21x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
run_tests layernorm rmsnorm
TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_row_groups test_wide_rows test_partial_phases &
TAG=rms_ sanitize /tmp/bin/test_gpu_rmsnorm test_row_groups test_wide_rows test_partial_phases &
wait
tests_summary
in_turns ${ROUNDS:-3} "prev rr" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X prev >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
