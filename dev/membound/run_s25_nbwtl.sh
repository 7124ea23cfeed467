#!/usr/bin/env bash
# Session 25: where nbw_kernel's time goes at LayerNorm backward bf16 4096x4096 (s25_nbw_timeline.patch: camel-nbwtl,
# layernorm_bwd.cu compiled with -DCML_NBW_DEV_TIMELINE=1; CML_NBW_TL names the file each nbw call overwrites).
# camel bench membound --ops layernorm_bwd --mode cold (one call at a time, L2 cold), the last call's timeline.
#   XDIR=build-s25x bash dev/membound/run_s25_nbwtl.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s25x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-nbwtl
CML_NBW_TL=$X/nbw_tl.txt timeout 120 /tmp/bin/camel-nbwtl bench membound --ops layernorm_bwd --mode cold >$X/bench.txt 2>&1
stamp "timeline rc $?"
python3 dev/membound/nbw_timeline.py $X/nbw_tl.txt >$X/nbw_tl_summary.txt 2>&1
cat $X/stages.txt $X/nbw_tl_summary.txt
