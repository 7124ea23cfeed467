#!/usr/bin/env bash
# Session 21: the membound record on the final tree: camel bench membound (every op and shape, steady and cold) three
# times, joined per shape as the run of the median steady % of the same-size copy (dev/membound/median_runs.py), with
# the binary built here for 90a-real (build-s21x/camel-final.xz, COMMIT names its commit) and bench/torch_membound.py
# in the same job, joined into $OUT/membound_h100.json (torch_membound.py --combine; its table in $OUT/membound_table.md)
#   COMMIT=<hash> XDIR=build-s21x bash dev/s21_record.sh     (carry build-s21x; timeout_s 600)
# BIN=<path> takes that binary instead (dev/s32_verify_record.sh: the one its verification built).
set -u
. "$(dirname "$0")/carried.sh"
if [ -n "${BIN:-}" ]; then cp "$BIN" /tmp/bin/camel-final; else unpack camel-final; fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$X/gpu.txt 2>&1
for r in 1 2 3; do
    timeout 100 /tmp/bin/camel-final bench membound --json $X/membound_ours_$r.json --commit "${COMMIT:-s21}" \
        >$X/bench_membound_$r.log 2>&1
    stamp "camel bench membound run $r rc $?"
done
python3 dev/membound/median_runs.py $X/membound_ours.json $X/membound_ours_[123].json
PYTHONUNBUFFERED=1 timeout 300 python3 bench/torch_membound.py --json $X/membound_torch.json >$X/bench_torch.log 2>&1
stamp "torch_membound rc $?"
python3 bench/torch_membound.py --combine $X/membound_ours.json $X/membound_torch.json --out ${OUT:-/tmp}/membound_h100.json \
    >${OUT:-/tmp}/membound_table.md 2>&1
stamp "combine rc $?"
cp $X/stages.txt $X/membound_ours.json $X/membound_torch.json ${OUT:-/tmp}/ 2>/dev/null
python3 dev/membound/record_summary.py ${OUT:-/tmp}/membound_h100.json
