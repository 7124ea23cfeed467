#!/usr/bin/env bash
# Session 19: a CTA's last tile stages its whole TMA-store epilogue in the ring (cml__sm90_wide_last,
# CML_SM90_WIDE_LAST=0 turns it off) -- the 5-stage 192-wide ring otherwise stages 1 block a round (3 rounds), the
# 256-wide 4-stage 2 (2 rounds); each round is a barrier pair, a proxy fence and a wait for the stores before, with
# the tensor cores idle. Session 9 measured those rounds costing 4.5-8% at K = 768 with 6-8 tiles a CTA.
# Predicted: +2-5% on the shapes of 1-2 tiles a CTA with the 5-stage ring (8192 x 768 x 768 fwd / dX, the 192-wide
# dW, dX 8192 x 768 x 2304 / 3072), +0-1% elsewhere (the last of many tiles).
# Steps: build (working tree); test_gpu_gemm with the switch on (default) and off; racecheck / synccheck / memcheck
# of test_sm90_configs + test_tma_epilogues; camel bench gemm bf16 (gpt2 set + squares 1024-4096), on / off in
# turns, 3 rounds; summary LAST: per case median ours ms off -> on, off/on, ratio to cuBLASLt.
# Decision: keep if tests and sanitizers are clean and the GPT-2 geomean of off/on >= 1.005 with no case < 0.99.
# The code is s19_wide_last.patch (git apply dev/gemm_sm90/s19_wide_last.patch first).
#   bash dev/gemm_sm90/run_s19_wide.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=build-wide
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    >$X/configure.log 2>&1
timeout 330 cmake --build $B -j16 --target camel test_gpu_gemm >$X/build.log 2>&1
stamp "build rc $?"
(cd $B/tests && timeout 240 ./test_gpu_gemm >$X/test_on.log 2>&1; echo "rc $?" >>$X/test_on.log) &
(cd $B/tests && CML_SM90_WIDE_LAST=0 timeout 240 ./test_gpu_gemm >$X/test_off.log 2>&1; echo "rc $?" >>$X/test_off.log) &
for tool in racecheck synccheck memcheck; do
    (cd $B/tests && CML_TEST_ONLY=test_sm90_configs CML_TEST_SANITIZER=1 timeout 280 compute-sanitizer --tool $tool \
        --error-exitcode 99 --report-api-errors no ./test_gpu_gemm >$X/san_${tool}_configs.log 2>&1
     echo "rc $?" >>$X/san_${tool}_configs.log
     CML_TEST_ONLY=test_tma_epilogues CML_TEST_SANITIZER=1 timeout 200 compute-sanitizer --tool $tool \
        --error-exitcode 99 --report-api-errors no ./test_gpu_gemm >$X/san_${tool}_tmaepi.log 2>&1
     echo "rc $?" >>$X/san_${tool}_tmaepi.log) &
done
wait
for f in $X/san_*.log; do [ $(stat -c %s $f) -gt 100000 ] && { head -c 50000 $f >$f.cut; mv $f.cut $f; }; done
stamp "tests: $(for f in $X/test_*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
grep -h "FAIL\|failed\|ERROR SUMMARY\|Hazard" $X/test_*.log $X/san_*.log | sort | uniq -c | head -20
for r in 1 2 3; do
    vs="off on"; [ $r = 2 ] && vs="on off"
    for v in $vs; do
        sw=""; [ $v = off ] && sw="CML_SM90_WIDE_LAST=0"
        env $sw timeout 120 $B/apps/camel/camel bench gemm --dtype bf16 --set gpt2,square --sizes 1024,2048,4096 \
            --reps 20 --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
python3 - $X <<'PY' >$X/summary.txt 2>&1
import json, glob, os, sys, statistics as st, math
X = sys.argv[1]
runs = {}
for f in glob.glob(os.path.join(X, 'bench_*_*.json')):
    v = os.path.basename(f).split('_')[1]
    for r in json.load(open(f))['results']:
        s = r['shape']
        key = '%s %s %dx%dx%d %s%s' % (r['op'], r['name'], s['M'], s['N'], s['K'], s['op_a'], s['op_b'])
        d = runs.setdefault(key, {}).setdefault(v, {'ms': [], 'ratio': [], 'path': r.get('path', '')})
        d['ms'].append(r['ours_ms']); d['ratio'].append(r['ratio'])
g = []
print('%-40s %-26s %9s %9s %7s  %s' % ('case', 'path', 'off ms', 'on ms', 'off/on', 'ratio to cuBLASLt off -> on'))
for k, d in runs.items():
    if 'on' not in d or 'off' not in d: continue
    off, on = st.median(d['off']['ms']), st.median(d['on']['ms'])
    q = off / on
    if k.startswith('gpt2'): g.append(q)
    print('%-40s %-26s %9.4f %9.4f %7.3f  %.3f -> %.3f' % (k, d['on']['path'][:26], off, on, q, st.median(d['off']['ratio']),
                                                           st.median(d['on']['ratio'])))
if g: print('GPT-2 geomean off/on %.4f, min %.3f' % (math.exp(sum(map(math.log, g)) / len(g)), min(g)))
PY
cat $X/stages.txt $X/summary.txt
