#!/usr/bin/env bash
# Session 25: a variant of nbw_kernel (16-bit rows of 257..512 words: LayerNorm / RMSNorm backward bf16 4096x4096)
# against the tree before it. V=early (s25_early.patch): the group's second row issued at once, not behind the first
# row's words and gamma's sync; V=pairs (s25_pairs.patch, CML_NORM_BWD_WIDE_PAIRS): clusters of 2 blocks adding their
# partial rows through DSMEM before storing one; V=ring (s25_ring.patch, CML_NORM_BWD_WIDE_RING): nbw_ring_kernel, two
# rows in flight a group, the dgamma / dbeta terms in registers. camel-base = 70a55c2, camel-$V = + the patch; the norm tests of the
# patch, sanitizers of test_wide_rows; camel bench membound in turns. Built locally (build-s25x/).
#   V=pairs XDIR=build-s25x bash dev/membound/run_s25_nbw.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s25x)
set -u
V=${V:-pairs}
. "$(dirname "$0")/../carried.sh"
unpack
run_tests layernorm rmsnorm
TOOLS="memcheck racecheck synccheck" sanitize /tmp/bin/test_gpu_layernorm test_wide_rows
TAG=rms_ TOOLS="memcheck racecheck synccheck" sanitize /tmp/bin/test_gpu_rmsnorm test_wide_rows
tests_summary
in_turns ${ROUNDS:-5} "base $V" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X base >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
