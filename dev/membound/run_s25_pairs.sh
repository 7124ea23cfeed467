#!/usr/bin/env bash
# Session 25: nbw_kernel in pairs (CML_NORM_BWD_WIDE_PAIRS: clusters of 2 blocks add their partial rows through DSMEM
# before storing one, so half the partial rows are written and summed again). camel-base = 70a55c2, camel-pairs = +
# the change; the norm tests of the change, sanitizers of test_wide_rows. Built locally (build-s25x/).
#   XDIR=build-s25x bash dev/membound/run_s25_pairs.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s25x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
run_tests layernorm rmsnorm
TOOLS="memcheck racecheck synccheck" sanitize /tmp/bin/test_gpu_layernorm test_wide_rows
TAG=rms_ TOOLS="memcheck racecheck synccheck" sanitize /tmp/bin/test_gpu_rmsnorm test_wide_rows
tests_summary
in_turns ${ROUNDS:-5} "base pairs" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X base >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
