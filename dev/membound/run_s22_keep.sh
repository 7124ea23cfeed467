#!/usr/bin/env bash
# Session 22: the norm backward's partial rows stored with an L2 evict_last policy (s22_keep_partials.patch: nbs_kernel
# and nbw_kernel; the partial sum reads them back and discards them), so that they need not reach DRAM (ncu: 11.8 of
# LayerNorm bf16 1024x32768's 17.3 MB did). camel-final = 9907e51, camel-keep = it + the patch (build-s22x/).
#   XDIR=build-s22x bash dev/membound/run_s22_keep.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-final camel-keep
in_turns ${ROUNDS:-3} "final keep" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X final >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
