#!/usr/bin/env bash
# Session 19: 128 x 64 tiles (BN = 64, 16-bit inputs, 8 stages, both consumers on one tile, m64n64k16) as a
# plan option. Why: ncu (run_s19_names.sh) shows cuBLASLt's 1024^3 kernel nvjet_sm90_tst_128x64_64x8_1x2 -- 128
# CTAs of a 64 (our M) x 128 (our N) tile, 8 stages, both consumer warpgroups on it -- at 7.4 us against our
# 64 x 128 ping-pong tile's 9.05 us, where one tile a CTA leaves our second consumer idle. Steps: build; the GEMM
# tests whole (the forced-configuration sweep now includes width 64) and memcheck of test_sm90_configs; then
# camel tune gemm (every valid configuration timed, widths 256 / 192 / 128 / 64) for the bf16 squares 1024-4096
# and the GPT-2 set: which cases now pick width 64, at what gain.
# The code is s19_bn64.patch (apply it first: git apply dev/gemm_sm90/s19_bn64.patch).
#   bash dev/gemm_sm90/run_s19_bn64.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=build-bn64
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    >$X/configure.log 2>&1
timeout 330 cmake --build $B -j16 --target camel test_gpu_gemm >$X/build.log 2>&1
stamp "build rc $?"
(cd $B/tests && timeout 240 ./test_gpu_gemm >$X/test_gemm.log 2>&1; echo "rc $?" >>$X/test_gemm.log) &
(cd $B/tests && CML_TEST_ONLY=test_sm90_configs CML_TEST_SANITIZER=1 timeout 240 compute-sanitizer --tool memcheck \
    --error-exitcode 99 --report-api-errors no ./test_gpu_gemm >$X/san_memcheck.log 2>&1; echo "rc $?" >>$X/san_memcheck.log) &
wait
stamp "tests: gemm rc $(tail -1 $X/test_gemm.log | cut -d' ' -f2), memcheck rc $(tail -1 $X/san_memcheck.log | cut -d' ' -f2)"
grep -h "forced configurations\|FAIL\|failed" $X/test_gemm.log $X/san_memcheck.log | head -20
timeout 120 $B/apps/camel/camel tune gemm --dtype bf16 --set square --sizes 1024,2048,4096 --ops NN \
    --json $X/tune_square.json >$X/tune_square.txt 2>&1
stamp "tune square rc $?"
[ $(el) -lt 420 ] && timeout $((560 - $(el))) $B/apps/camel/camel tune gemm --dtype bf16 --set gpt2 \
    --json $X/tune_gpt2.json >$X/tune_gpt2.txt 2>&1
stamp "tune gpt2 rc $?"
python3 - $X <<'PY' >$X/summary.txt 2>&1
import json, sys, os
for f in ('tune_square.json', 'tune_gpt2.json'):
    p = os.path.join(sys.argv[1], f)
    if not os.path.exists(p):
        print(f, 'missing'); continue
    for r in json.load(open(p))['results']:
        s, e, b = r['shape'], r['estimate'], r['best']
        print('%-9s %-10s %6d x %5d x %5d %s%s  est %dx%dx%d c%d -> best %dx%dx%d c%d g%d  %.4f -> %.4f ms  ratio %.3f -> %.3f%s' % (
            r['op'], r['name'], s['M'], s['N'], s['K'], s['op_a'], s['op_b'], e['rows'], e['bn'], e['splits'],
            e['cluster'], b['rows'], b['bn'], b['splits'], b['cluster'], b['group_m'], r['estimate_ms'], r['best_ms'],
            r['estimate_ratio'], r['best_ratio'], '  <- 64' if b['bn'] == 64 else ''))
PY
cat $X/stages.txt $X/summary.txt
