#!/usr/bin/env bash
# Session 22: the LayerNorm forward staged by bulk copies (norm_fwd_staged.cuh, lnf_staged_kernel: persistent CTAs,
# the row's chunk states through L2 with y two rows behind) against the one-pass chunk kernel (CML_LN_FWD_STAGED=0),
# by default for rows of >= 512 KB (on) and for every long row (all: mode 2). Binaries built locally (90a-real,
# stripped, xz) in build-s22x/. Steps: test_gpu_layernorm / rmsnorm whole; memcheck / racecheck of test_fwd_staged
# and test_staged_rows; camel bench membound (LayerNorm forward and both backwards) in turns, ROUNDS rounds.
#   XDIR=build-s22x bash dev/membound/run_s22_fwd.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
printf '#!/bin/sh\nCML_LN_FWD_STAGED=0 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-off
printf '#!/bin/sh\nexec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-on
printf '#!/bin/sh\nCML_LN_FWD_STAGED=2 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-all
chmod +x /tmp/bin/camel-*
run_tests layernorm rmsnorm
TOOLS="memcheck racecheck" sanitize /tmp/bin/test_gpu_layernorm test_fwd_staged test_staged_rows
tests_summary
in_turns ${ROUNDS:-3} "off on all" bench membound --ops layernorm,layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X off >$X/summary.txt 2>&1
cat $X/stages.txt; grep "^layernorm \|geomean" $X/summary.txt; grep "32768\|262144" $X/summary.txt | grep bwd
