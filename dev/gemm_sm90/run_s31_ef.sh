#!/usr/bin/env bash
# Session 31: D's TMA stores with an L2 evict-first policy (-DCML_SM90_DEV_D_EVICT_FIRST=1, camel-ef) against the tree
# (camel-base), in turns: the batched set (64 x 1024^3 and its stacked GEMM) for every 16-bit, tf32 and e4m3, then bf16
# squares 4096 / 8192.
#   run(carry=["build-s31x"], command="XDIR=build-s31x bash dev/gemm_sm90/run_s31_ef.sh")
set -u
XDIR=${XDIR:-build-s31x}
X=${OUT:-/tmp}/x
. "$(dirname "$0")/../carried.sh"
unpack camel-base camel-ef
in_turns ${ROUNDS:-4} "base ef" bench gemm --dtype bf16,fp16,tf32,e4m3 --set batched --reps 20
mkdir -p $X/sq && for f in $X/bench_*; do mv $f $X/sq/ 2>/dev/null; done
X0=$X; X=$X/sq2; mkdir -p $X
in_turns 2 "base ef" bench gemm --dtype bf16 --set square --sizes 4096,8192 --reps 20
X=$X0
python3 - $X <<'PY'
import json, sys, glob, statistics, collections
for sub in ("sq", "sq2"):
    rows = collections.defaultdict(list)
    for f in glob.glob(f"{sys.argv[1]}/{sub}/bench_*_*.json"):
        v = f.split("/")[-1].split("_")[1]
        for r in json.load(open(f))["results"]:
            key = (r["dtype"], r["name"])
            rows[key + (v,)].append((r["ours_ms"], r.get("ours_vs_one_gemm")))
    for key in sorted({k[:2] for k in rows}):
        b, e = rows[key + ("base",)], rows[key + ("ef",)]
        mb, me = statistics.median(x[0] for x in b), statistics.median(x[0] for x in e)
        vb = [x[1] for x in b if x[1]]; ve = [x[1] for x in e if x[1]]
        print(f"{key[0]:5} {key[1]:18} base {mb:.4f} ef {me:.4f} ms  ef speed {mb / me:.4f}x",
              f" vs one: base {statistics.median(vb):.3f} ef {statistics.median(ve):.3f}" if vb else "")
PY
