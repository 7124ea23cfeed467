#!/usr/bin/env bash
# Session 31: variants camel-$V (V="NAME ...": ef: D stored with an L2 evict-first policy, -DCML_SM90_DEV_D_EVICT_FIRST=1; bpN: the
# next problem's first N k-blocks prefetched into L2, -DCML_SM90_BATCH_PREFETCH=N) against the tree (camel-base), in turns:
# the batched set (64 x 1024^3 and its stacked GEMM) for bf16, fp16, tf32, e4m3, then bf16 squares 4096 / 8192.
#   run(carry=["build-s31x"], command="V='bp4 bp2' XDIR=build-s31x bash dev/gemm_sm90/run_s31_ab.sh")
set -u
XDIR=${XDIR:-build-s31x}
X=${OUT:-/tmp}/x
. "$(dirname "$0")/../carried.sh"
unpack camel-base $(for v in $V; do echo camel-$v; done)
in_turns ${ROUNDS:-4} "base $V" bench gemm --dtype bf16,fp16,tf32,e4m3 --set batched --reps 20
mkdir -p $X/sq && for f in $X/bench_*; do mv $f $X/sq/ 2>/dev/null; done
X0=$X; X=$X/sq2; mkdir -p $X
[ "${SQ:-1}" = 1 ] && in_turns 2 "base $V" bench gemm --dtype bf16 --set square --sizes 4096,8192 --reps 20
X=$X0
python3 - $X $V <<'PY'
import json, sys, glob, statistics, collections
for sub in ("sq", "sq2"):
    rows = collections.defaultdict(list)
    for f in glob.glob(f"{sys.argv[1]}/{sub}/bench_*_*.json"):
        v = f.split("/")[-1].split("_")[1]
        for r in json.load(open(f))["results"]:
            key = (r["dtype"], r["name"] if r["name"] != "square" else str(r["shape"]["M"]))
            rows[key + (v,)].append((r["ours_ms"], r.get("ours_vs_one_gemm")))
    for key in sorted({k[:2] for k in rows}):
        b = rows[key + ("base",)]
        mb = statistics.median(x[0] for x in b)
        vb = [x[1] for x in b if x[1]]
        line = f"{key[0]:5} {key[1]:18} base {mb:.4f} ms" + (f" (vs one {statistics.median(vb):.3f})" if vb else "")
        for v in sys.argv[2:]:
            e = rows[key + (v,)]
            me = statistics.median(x[0] for x in e)
            ve = [x[1] for x in e if x[1]]
            line += f" | {v} {me:.4f} ms {mb / me:.4f}x" + (f" (vs one {statistics.median(ve):.3f})" if ve else "")
        print(line)
PY
