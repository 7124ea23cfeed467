#!/usr/bin/env bash
# Session 32: does the staged kernel's cluster form need all 132 SMs at bf16 1024x32768? Its groups capped by a dev
# switch (s32_groups_cap.patch: CML_NBS_GROUPS_CAP) at 64 (16 rows each, as the busiest of 66 walk), 60 and 33, in
# turns against the plan (66 clusters of 2).   XDIR=build-s32g bash dev/membound/run_s32_groups.sh
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel
printf '#!/bin/sh\nexec /tmp/bin/camel "$@"\n' >/tmp/bin/camel-base
for g in 64 60 33; do printf '#!/bin/sh\nCML_NBS_GROUPS_CAP=%s exec /tmp/bin/camel "$@"\n' $g >/tmp/bin/camel-g$g; done
chmod +x /tmp/bin/camel-*
in_turns ${ROUNDS:-3} "base g64 g60 g33" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X base >$X/summary.txt 2>&1
grep -E "1024x32768|geomean" $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && cp $X/summary.txt ${OUT:-/tmp/out}/groups_summary.txt
