#!/usr/bin/env bash
# Session 19, end: the final tree built whole for sm_90a, `ctest -L gpu`, and `camel tune gemm --json` on 1024^3 (its new "quick" field).
#   bash dev/s19_verify.sh      (timeout_s 420)
set -u
T0=$(date +%s)
B=build-verify
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/tmp/cfg.log 2>&1
timeout 300 cmake --build $B -j16 >/tmp/build.log 2>&1; echo "build rc $? at $(( $(date +%s) - T0 )) s"
(cd $B && timeout 200 ctest -L gpu -j4 --output-on-failure 2>&1 | tail -8)
echo "ctest done at $(( $(date +%s) - T0 )) s"
timeout 60 $B/apps/camel/camel tune gemm --dtype bf16 --set square --sizes 1024 --ops NN --json /tmp/t.json >/tmp/t.txt 2>&1; echo "tune rc $?"
python3 -c "
import json; r=json.load(open('/tmp/t.json'))['results'][0]; q=r['quick']
print('quick entries', len(q), 'tried', r['configs_tried'], 'fields', r['quick_fields'], 'best quick', min(x[5] for x in q if x[5]), 'best', r['best_ms'])"
