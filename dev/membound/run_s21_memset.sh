#!/usr/bin/env bash
# Session 21: what the row-sync reset (a cudaMemsetAsync of the workspace before every one-pass long-row kernel:
# LayerNorm / RMSNorm forward, softmax, cross-entropy, nbl_kernel's rows of several chunks) costs a call. camel-m2 is
# 6e89ee2 with s21_memset2.patch: CML_DEV_MEMSET2=1 issues the memset twice (timing only). one = default, two = the
# memset twice; the difference bounds what a reset without a memset could save (less the PDL start it also loses).
#   XDIR=build-s21x bash dev/membound/run_s21_memset.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s21x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
printf '#!/bin/sh\nexec /tmp/bin/camel-m2 "$@"\n' >/tmp/bin/camel-one && chmod +x /tmp/bin/camel-one
printf '#!/bin/sh\nCML_DEV_MEMSET2=1 exec /tmp/bin/camel-m2 "$@"\n' >/tmp/bin/camel-two && chmod +x /tmp/bin/camel-two
in_turns ${ROUNDS:-3} "one two" bench membound --ops layernorm,rmsnorm,softmax,cross_entropy,layernorm_bwd --mode steady
python3 dev/membound/ab_summary.py $X one >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
