#!/usr/bin/env bash
# Session 11 plan, step A1 (dev/gemm_sm90/README.md, "Plan (session 11 study, helper h11e)"): does
# sharing each stage among 4 or 8 CTAs (1-D clusters along M, B multicast) cost the lean kernel per-SM
# speed? Today's kernel, no patch: the TN harness with -DHARNESS_WIDE_CLUSTERS (clusters 1, 2, 4, 8;
# the grid capped at the resident clusters) and the library's 5-stage 192-wide ring, on the GPT-2
# weight gradients (K = 8192), configurations interleaved, ROUNDS rounds (median of 30 each, L2 flushed,
# ratio to cuBLAS in the same process). Device, repository root, ~90 s:
#   bash dev/gemm_sm90/wide_cluster_probe.sh; tar czf $OUT/logs.tgz -C /tmp/wc .
# Locally: DRY=1 bash dev/gemm_sm90/wide_cluster_probe.sh (prints the commands it would run).
set -u
logs=/tmp/wc
mkdir -p "$logs"
run() { if [ "${DRY:-0}" = 1 ]; then echo "$*"; else "$@"; fi; }
run nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -DHARNESS_ONLY_TN \
    -DHARNESS_WIDE_CLUSTERS -DHARNESS_192_STAGES=5 -Xptxas=--warn-on-spills -Xptxas -v dev/gemm_sm90/harness.cu \
    -lcublas -lcuda -o "$logs/h" >"$logs/nvcc.log" 2>&1 || { echo "nvcc failed"; tail -5 "$logs/nvcc.log"; exit 1; }
grep -E "C75[0-9][0-9]|spill stores [1-9]|spill loads [1-9]" "$logs/nvcc.log" | sed 's/^/ptxas: /'
: >"$logs/harness.log"
for round in $(seq 1 "${ROUNDS:-2}"); do
    for case in ${CASES:-3072,768,8192,192 768,3072,8192,192 2304,768,8192,128}; do
        for cl in ${CLUSTERS:-1 2 4 8}; do
            set -- ${case//,/ }
            run taskset -c 0 timeout 60 "$logs/h" $1 $2 $3 T N 30 $4 16 $cl tma 2>&1 | sed "s/^/r$round c$cl /" |
                tee -a "$logs/harness.log"
        done
    done
done
echo "== summary: ratio to cuBLAS (rel.diff must equal c1's: same K order a tile, so D is bitwise the same)"
grep -E "^r[0-9]+ c[0-9]+ .*\| ratio" "$logs/harness.log" |
    sed -E 's/^(r[0-9]+ c[0-9]+) +([0-9]+) x +([0-9]+) x +([0-9]+) .*bn=([0-9]+).*ours ([0-9.]+) ms.*ratio ([0-9.]+) \| rel.diff ([^ ]+).*/\1 \2x\3x\4 bn\5 ours \6 ms ratio \7 rel \8/'
