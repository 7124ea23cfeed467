#!/usr/bin/env bash
# Session 24: the 160-wide tile (cml__gemm_sm90_config.bn = 160): test_gpu_gemm whole, compute-sanitizer memcheck /
# racecheck / synccheck of test_sm90_wide160, then `camel tune gemm` over the bf16 and fp16 GPT-2 set (every
# configuration, the 160-wide ones included) into $X/run.inc + run.json for tuned_merge.py.
#   XDIR=build-s24x bash dev/gemm_sm90/run_s24_w160.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s24x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-${CAMEL:-new} test_gpu_gemm
run_tests gemm
sanitize /tmp/bin/test_gpu_gemm test_sm90_wide160
tests_summary
timeout ${TUNE_S:-300} /tmp/bin/camel-${CAMEL:-new} tune gemm --dtype ${DTYPES:-bf16,fp16} --set ${SETS:-gpt2} \
    --out $X/run.inc --json $X/run.json >$X/tune.txt 2>&1
stamp "tune rc $?"
grep -v 'tune gemm \[' $X/tune.txt | tail -40
python3 - $X/run.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))['results']:
    q = sorted([x for x in r['quick'] if x[6]], key=lambda x: x[6])
    w160 = [x for x in q if x[1] == 160][:2]
    print(r['dtype'], r['name'], r['op'], 'best', q[0], '160:', w160, 'ref', r['ref_ms'])
PY
