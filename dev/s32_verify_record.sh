#!/usr/bin/env bash
# Session 32, end: dev/s21_verify.sh (the whole tree for sm_90a with -Werror, ctest -L gpu), then with that build the
# membound record as dev/s21_record.sh takes it (camel bench membound three times joined per shape by the median
# steady % of the same-size copy, PyTorch's bench/torch_membound.py once, combined into $OUT/membound_h100.json).
#   run(command="COMMIT=<short hash> bash dev/s32_verify_record.sh", timeout_s=600)
set -u
T0=$(date +%s)
bash dev/s21_verify.sh
B=build-verify X=/tmp/x
mkdir -p $X
for r in 1 2 3; do
    timeout 100 $B/apps/camel/camel bench membound --json $X/membound_ours_$r.json --commit "${COMMIT:-unknown}" \
        >$X/bench_membound_$r.log 2>&1
    echo "camel bench membound run $r rc $? at $(($(date +%s) - T0)) s"
done
python3 dev/membound/median_runs.py $X/membound_ours.json $X/membound_ours_[123].json
PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_membound.py --json $X/membound_torch.json >$X/bench_torch.log 2>&1
echo "torch_membound rc $? at $(($(date +%s) - T0)) s"
python3 bench/torch_membound.py --combine $X/membound_ours.json $X/membound_torch.json \
    --out ${OUT:-/tmp}/membound_h100.json >${OUT:-/tmp}/membound_table.md 2>&1
python3 - ${OUT:-/tmp}/membound_h100.json <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))['results']
big = [r for r in rows if r['bytes'] >= 16 * 2**20]
print('shapes >= 16 MiB: %d; >= 90%% of the same-size copy: %d; >= PyTorch: %d of %d' % (
    len(big), sum(r['size_ratio'] >= 0.9 for r in big), sum(r['ratio'] >= 1 for r in rows if r.get('ratio')), len(rows)))
for r in big:
    if r['size_ratio'] < 0.9:
        print('under: %s %s %dx%d %.1f%%' % (r['op'], r['dtype'], r['shape']['rows'], r['shape']['cols'], 100 * r['size_ratio']))
PY
