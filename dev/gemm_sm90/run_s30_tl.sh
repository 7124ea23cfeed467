#!/usr/bin/env bash
# (run 1 of this script: a binary from an intermediate tree of session 30 with CML_SM90_GROUP_ORDER, since removed;
# rerun on the final tree for tl_phases_final.txt: its order is the library's largest-first; dev/gemm_sm90/README.md, session 30.)
# Session 30: timelines (-DCML_SM90_DEV_TIMELINE=1 build, the tile slots and the descending order) of the grouped set and
# its stacked GEMM, e4m3 and bf16, each launch its own file; tl_phases.py sums each CTA's life by phase.
#   run(carry=["build-s30x"], command="XDIR=build-s30x bash dev/gemm_sm90/run_s30_tl.sh; tar czf $OUT/r.tgz -C /tmp/x .")
set -u
XDIR=${XDIR:-build-s30x}
. "$(dirname "$0")/../carried.sh"
unpack camel-tl
for dt in e4m3 bf16; do
    mkdir -p $X/tl_$dt
    CML_SM90_GROUP_ORDER=7,6,5,4,3,2,1,0 CML_SM90_TL_SEQ=1 CML_SM90_TL_DIR=$X/tl_$dt timeout 100 /tmp/bin/camel-tl \
        bench gemm --dtype $dt --set grouped --reps 3 >$X/tlbench_$dt.txt 2>&1
    stamp "timelines $dt rc $?"
done
for dt in e4m3 bf16; do python3 dev/gemm_sm90/tl_phases.py $X/tl_$dt/*.txt; done
