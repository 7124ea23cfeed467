#!/usr/bin/env bash
# Session 26: the 160-wide tile (s24_wide160.patch rebased; then TMA stores of D in 32-column blocks, clusters of 4 as a
# column or 2 x 2 -- the library from the session's commit on), now that s26/wgmma_rate.cu measured n160 at the full
# tensor rate: test_sm90_wide160 and its three sanitizers, timelines of forced configurations on the MLP weight
# gradients (CML_SM90_DEV_FORCE="bn,splits,cluster,group_m,cluster_n", the timeline build only), and camel tune gemm's
# quick pass over the bf16 / fp16 GPT-2 set. Binaries built here into build-s26x/ (camel-w160; camel-w160tl with
# -DCML_SM90_DEV_TIMELINE=1 by s24_build_variant.sh; test_gpu_gemm).
#   XDIR=build-s26x bash dev/gemm_sm90/run_s26_w160.sh   (carry build-s26x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-w160 camel-w160tl test_gpu_gemm
(CML_TEST_ONLY=wide160 timeout 200 /tmp/bin/test_gpu_gemm >$X/test_wide160.log 2>&1; echo "rc $?" >>$X/test_wide160.log)
stamp "test_sm90_wide160: $(tail -3 $X/test_wide160.log | tr '\n' ' ')"
TOOLS="memcheck synccheck racecheck" sanitize /tmp/bin/test_gpu_gemm test_sm90_wide160
tests_summary
for f in 160,1,4,8,1 160,1,4,8,2; do
    mkdir -p $X/tl_$f
    CML_SM90_DEV_FORCE=$f CML_SM90_TL_DIR=$X/tl_$f timeout 60 /tmp/bin/camel-w160tl bench gemm --dtype bf16 \
        --set gpt2 --reps 3 >$X/bench_tl_$f.txt 2>&1
    stamp "timeline $f rc $?"
done
timeout 240 /tmp/bin/camel-w160 tune gemm --dtype bf16,fp16 --set gpt2 --reps 8 --json $X/tune.json >$X/tune.txt 2>&1
stamp "tune rc $?"
python3 - $X/tune.json <<'EOF' | tee $X/tune_dw.txt
import json, sys
for r in json.load(open(sys.argv[1]))['results']:
    s = r['shape']
    if s['K'] != 8192: continue
    by = {}
    for rows, bn, sp, cl, g, pp, cn, ms in (x for x in r.get('quick', []) if x[7] is not None):
        k = (bn, cl * 10 + cn, sp)
        by[k] = min(by.get(k, 1e9), ms)
    best = sorted(by.items(), key=lambda kv: kv[1])[:12]
    print('%s %5dx%5dx%5d %s%s ref %.4f best %.4f (%s) | %s' % (r['dtype'], s['M'], s['N'], s['K'], s['op_a'], s['op_b'], r['ref_ms'], r['best_ms'], r['best'],
          '  '.join('%dw c%d%s s%d %.4f' % (k[0], k[1] // 10 // (k[1] % 10), 'x2' if k[1] % 10 == 2 else '', k[2], v) for k, v in best)))
EOF
for f in 160,1,4,8,1 160,1,4,8,2; do
    echo "== $f"
    python3 dev/gemm_sm90/timeline.py $X/tl_$f/tl_*x8192*TN.txt 2>&1 | head -40
done >$X/tl_summary.txt
cat $X/stages.txt
grep -h "TN" $X/tune.txt | head -20
cat $X/tune_dw.txt
grep -A8 "== \|shape\|slot" $X/tl_summary.txt | head -120
