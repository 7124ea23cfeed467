#!/usr/bin/env bash
# Session 22: nbs_kernel with 1024 threads a CTA (2 words a thread and tensor in the cluster form, 1 in the row-sync
# form: s22_nbs_1024.patch) against 512 (camel-final = d1205a9): the cluster form issued at IPC ~2 with 16 warps an
# SM (ncu, session 21), so twice the warps may hide more. Binaries built locally in build-s22x/. Steps: test_gpu_
# layernorm / rmsnorm whole (the 1024-thread build); camel bench membound (the norm backward) in turns.
#   XDIR=build-s22x bash dev/membound/run_s22_t1024.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
run_tests layernorm rmsnorm
tests_summary
in_turns ${ROUNDS:-3} "final t1024" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X final >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
