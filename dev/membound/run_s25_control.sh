#!/usr/bin/env bash
# Session 25: a control for run_s25_nbw.sh (V=early, V=pairs), which both read ~0.95x at bf16 4096x4096 only:
# camel-base (70a55c2's build kept from before this session's changes), camel-head (the same source, the norm
# backward files compiled again today) and camel-pairs, in turns. Built locally (build-s25x/).
#   XDIR=build-s25x bash dev/membound/run_s25_control.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s25x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
in_turns ${ROUNDS:-5} "base head pairs" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X base >$X/summary.txt 2>&1
python3 dev/membound/ab_summary.py $X head >$X/summary_head.txt 2>&1
cat $X/stages.txt; grep "4096x4096\|geomean" $X/summary.txt $X/summary_head.txt
