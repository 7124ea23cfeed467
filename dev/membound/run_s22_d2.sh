#!/usr/bin/env bash
# Session 22: the staged norm backward's row-sync form with dx two rows behind pass 1 (D = 2, rings of >= 4 stages of
# <= 3 words a thread) and mean / rstd loaded ahead, in mode 2 (the default: the row-sync form for rows of more than
# 16 chunks, the cluster form as before) and mode 3 (the row-sync form for every long row), against mode 1 (the
# dispatch before: the cluster form, nbl / nbx / nbc). Binaries built locally (90a-real, stripped, xz) in
# build-s22x/. Steps: the plans (staged_plan_probe); test_gpu_layernorm / rmsnorm whole; memcheck / racecheck of both
# tests' test_staged_rows; camel bench membound (the norm backward) in turns, ROUNDS rounds; the summary last.
#   XDIR=build-s22x bash dev/membound/run_s22_d2.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s22x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
for m in 2 3; do
    echo "== mode $m" >>$X/plans.txt
    CML_NORM_BWD_STAGED=$m /tmp/bin/staged_plan_probe >>$X/plans.txt 2>&1
done
printf '#!/bin/sh\nCML_NORM_BWD_STAGED=1 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-m1
printf '#!/bin/sh\nexec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-m2
printf '#!/bin/sh\nCML_NORM_BWD_STAGED=3 exec /tmp/bin/camel-new "$@"\n' >/tmp/bin/camel-m3
chmod +x /tmp/bin/camel-*
run_tests layernorm rmsnorm
TOOLS="memcheck racecheck" TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_staged_rows &
TOOLS="memcheck racecheck" TAG=rms_ sanitize /tmp/bin/test_gpu_rmsnorm test_staged_rows &
wait
tests_summary
in_turns ${ROUNDS:-3} "m1 m2 m3" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X m1 >$X/summary.txt 2>&1
grep -v "^== \|x 16384\|x 20000\|300 x" $X/plans.txt; cat $X/stages.txt $X/summary.txt
