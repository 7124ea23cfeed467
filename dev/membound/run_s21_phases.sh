#!/usr/bin/env bash
# Session 21: the partial-row sum (norm_bwd_partial.cuh) with 32 row phases from 128 partial rows on (4-9 rows a
# thread instead of up to 33 in dependent rounds; the first run of this script had 16 phases at 64..127 rows too).
# Binaries built locally (90a-real, stripped, xz) in build-s21x/: camel-head (93fcd64), camel-ph and the two norm
# tests (this change; camel-p8 = camel-ph with CML_NORM_BWD_PHASES=0: 8 phases always, the code before); nbrc, the
# racecheck probe (named_barrier_racecheck.cu).
# Steps: test_gpu_layernorm / rmsnorm whole; memcheck / racecheck / synccheck of their test_partial_phases (also the
# register rows with groups of unequal row counts under racecheck); camel bench membound --ops
# layernorm_bwd,rmsnorm_bwd --mode both, head / p8 / ph in turns, ROUNDS rounds; the summary last.
#   XDIR=build-s21x bash dev/membound/run_s21_phases.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s21x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
printf '#!/bin/sh\nCML_NORM_BWD_PHASES=0 exec /tmp/bin/camel-ph "$@"\n' >/tmp/bin/camel-p8 && chmod +x /tmp/bin/camel-p8
run_tests layernorm rmsnorm
TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_partial_phases &
TAG=rms_ sanitize /tmp/bin/test_gpu_rmsnorm test_partial_phases &
wait
# racecheck's model of named barriers whose groups run different numbers of rounds (named_barrier_racecheck.cu)
for m in equal unequal; do
    timeout 60 compute-sanitizer --tool racecheck --error-exitcode 99 /tmp/bin/nbrc $m \
        >$X/san_racecheck_probe_$m.log 2>&1
    echo "rc $?" >>$X/san_racecheck_probe_$m.log
done
tests_summary
in_turns ${ROUNDS:-3} "head p8 ph" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X head >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
