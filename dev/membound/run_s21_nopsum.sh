#!/usr/bin/env bash
# Session 21: what the norm backward's second kernel (the partial-row sum, norm_bwd_partial.cuh) costs a call.
# camel-dev is HEAD (93fcd64) with dev/membound/s21_nopsum.patch's switch: CML_DEV_PSUM=0 skips the partial-sum launch
# (dgamma / dbeta then wrong: a timing bound only, never kept). dev = HEAD's behaviour, nops = without the
# second kernel; camel bench membound --ops layernorm_bwd,rmsnorm_bwd, steady and cold, in turns.
#   XDIR=build-s21x bash dev/membound/run_s21_nopsum.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s21x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-dev
printf '#!/bin/sh\nCML_DEV_PSUM=0 exec /tmp/bin/camel-dev "$@"\n' >/tmp/bin/camel-nops && chmod +x /tmp/bin/camel-nops
in_turns ${ROUNDS:-3} "dev nops" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X dev >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
