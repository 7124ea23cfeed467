#!/usr/bin/env bash
# Session 31: 128 x 256 tiles in a column of 4 CTAs sharing B (cluster 4, cluster_n 0; each CTA reads 24 KB a k-block
# from L2 instead of 32 in pairs): `camel tune gemm` (its quick pass times every configuration on the same buffers) over
# the odd set (every op pair) and bf16 squares / GPT-2, then test_gpu_gemm whole.
#   run(carry=["build-s31x"], command="XDIR=build-s31x bash dev/gemm_sm90/run_s31_c4.sh")
set -u
XDIR=${XDIR:-build-s31x}
X=${OUT:-/tmp}/x
. "$(dirname "$0")/../carried.sh"
unpack camel-c4 test_gpu_gemm-c4
mv /tmp/bin/test_gpu_gemm-c4 /tmp/bin/test_gpu_gemm
timeout 250 /tmp/bin/camel-c4 tune gemm --dtype bf16,fp16 --set odd --ops NN,NT,TN,TT --reps 12 --json $X/tune_odd.json \
    --out /tmp/o.inc >/dev/null 2>&1
stamp "tune odd rc $?"
timeout 300 /tmp/bin/camel-c4 tune gemm --dtype bf16 --set square,gpt2 --sizes 2048,4096,8192 --reps 12 \
    --json $X/tune_sq.json --out /tmp/s.inc >/dev/null 2>&1
stamp "tune square/gpt2 rc $?"
run_tests gemm
tests_summary
python3 - $X <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/tune_*.json")):
    for r in json.load(open(f))["results"]:
        s, q = r["shape"], r["quick"]
        c2 = min((x[-1] for x in q if x[0] == 128 and x[1] == 256 and x[3] == 2 and x[2] == 1 and x[5] == 0 and x[-1]), default=None)
        c4 = min((x[-1] for x in q if x[0] == 128 and x[1] == 256 and x[3] == 4 and x[-1]), default=None)
        best = min((x for x in q if x[-1]), key=lambda x: x[-1])
        print(f"{r['dtype']:5} {r['name'][:14]:14} {s['M']}x{s['N']}x{s['K']} {s['op_a']}{s['op_b']} ref {r['ref_ms']:.4f} "
              f"est {r['estimate_ms']:.4f} best {best[-1]:.4f} {best[:7]} 256c2 {c2} 256c4 {c4}")
PY
