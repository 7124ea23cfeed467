#!/usr/bin/env bash
# Session 19: (1) the configuration space -- camel tune gemm now records every configuration's quick-pass median
# in its JSON ("quick"), so one run maps width / split / cluster / group_m / rows for every bf16 GPT-2 shape and the
# squares 1024-4096; (2) why cluster 2 (B multicast) loses to cluster 1 on 8192 x 768 x 768 NT when cuBLASLt runs
# its 192 x 128 tile in 1 x 2 clusters: ncu (SpeedOfLight, LaunchStats, WarpStateStats; raw page) of our
# 128 x 192 5-stage kernel at cluster 1 and 2 and of nvjet 192x128_64x5_1x2 TNT, each launch configuration's third
# launch in the tuner's run of the GPT-2 set (the first such launches are attn_proj fwd's).
#   bash dev/gemm_sm90/run_s19_space.sh; tar czf $OUT/logs.tgz -C /tmp/x .      (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=build-space
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a >$X/configure.log 2>&1
timeout 330 cmake --build $B -j16 --target camel >$X/build.log 2>&1
stamp "build rc $?"
timeout 150 $B/apps/camel/camel tune gemm --dtype bf16 --set square,gpt2 --sizes 1024,2048,4096 --ops NN \
    --json $X/tune.json >$X/tune.txt 2>&1
stamp "tune rc $?"
# (mangled names: a demangled-name regex with the template list matched nothing)
timeout 300 ncu --clock-control none --kernel-name-base mangled \
    -k 'regex:gemm_sm90_kernelILi192ELi5ELi0ELi0ELi0ELi[12]ELi0EE|192x128_64x5_1x2_h_bz_coopB_TNT' \
    --filter-mode per-launch-config --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section WarpStateStats --metrics dram__bytes_read.sum \
    --csv --page raw $B/apps/camel/camel tune gemm --dtype bf16 --set gpt2 >$X/ncu.csv 2>$X/ncu.err
stamp "ncu rc $? ($(wc -l <$X/ncu.csv) lines)"
python3 dev/gemm_sm90/ncu_stalls_raw.py $X/ncu.csv >$X/ncu_summary.txt 2>&1
python3 - $X/tune.json <<'PY' >$X/space_summary.txt 2>&1
import json, sys
for r in json.load(open(sys.argv[1]))['results']:
    s, q = r['shape'], [x for x in r.get('quick', []) if x[5] is not None]
    if not q: continue
    best = min(x[5] for x in q)
    by = {}
    for rows, bn, sp, cl, g, ms in q:  # best of each (rows, bn, splits, cluster) over group_m
        k = (rows, bn, sp, cl)
        by[k] = min(by.get(k, 1e9), ms)
    top = sorted(by.items(), key=lambda kv: kv[1])[:6]
    print('%-8s %-9s %5dx%5dx%5d %s%s ref %.4f: ' % (r['op'], r['name'], s['M'], s['N'], s['K'], s['op_a'], s['op_b'],
          r['ref_ms'] or 0) + '  '.join('%dx%dx%d c%d %.4f' % (k + (v,)) for k, v in top))
PY
cat $X/stages.txt $X/space_summary.txt $X/ncu_summary.txt
