#!/usr/bin/env bash
# Session 31: why the tall 256 x 160 tile's main loop runs at ~0.65 of its ideal on 3000 x 5000 x 1000 (128 x 256:
# ~0.8). The 3-stage ring (camel-tall2, camel-tl) against 4 stages with one 32-column epilogue block at a time
# (camel-tall4, camel-tl4: -DCML_SM90_TALL_STAGES=4); every op pair of the odd set (NT / TT: B K-major, no 64-byte
# swizzle blocks). Tuner quick passes (128 x 256 and the tall tile on the same buffers), then timelines.
#   run(carry=["build-s31x"], command="XDIR=build-s31x bash dev/gemm_sm90/run_s31_tall3.sh")
set -u
XDIR=${XDIR:-build-s31x}
X=${OUT:-/tmp}/x
. "$(dirname "$0")/../carried.sh"
unpack camel-tall2 camel-tall4 camel-tl camel-tl4
for v in tall2 tall4; do
    timeout 200 /tmp/bin/camel-$v tune gemm --dtype bf16 --set odd --ops NN,NT,TN,TT --reps 12 --json $X/tune_$v.json \
        --out /tmp/run_$v.inc >/dev/null 2>&1
    stamp "tune $v rc $?"
done
for v in tl:est:none tl:tall:256,160,1,2,8,0,0 tl4:tall4:256,160,1,2,8,0,0; do
    b=${v%%:*} r=${v#*:} n=${r%%:*} f=${r#*:}
    for ops in NN NT; do
        mkdir -p /tmp/tl_${n}_$ops
        CML_SM90_DEV_FORCE_ANY=$([ $f = none ] || echo $f) CML_SM90_TL_DIR=/tmp/tl_${n}_$ops timeout 100 \
            /tmp/bin/camel-$b bench gemm --dtype bf16 --set odd --ops $ops --reps 3 >/dev/null 2>&1
        python3 dev/gemm_sm90/timeline.py /tmp/tl_${n}_$ops/*3000* >$X/tl_${n}_$ops.txt 2>&1
    done
    stamp "timelines $n"
done
python3 - $X <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/tune_*.json")):
    for r in json.load(open(f))["results"]:
        s = r["shape"]
        if s["M"] != 3000: continue
        q = r["quick"]
        best = min((x for x in q if x[-1]), key=lambda x: x[-1])
        tall = [x for x in q if x[0] == 256]
        print(f.split("/")[-1], s["op_a"] + s["op_b"], "ref", r["ref_ms"], "est", r["estimate_ms"], "best", best,
              "tall", [(x[3], x[4], x[-1]) for x in tall])
PY
for f in $X/tl_*.txt; do echo "== $f"; sed -n 2,8p $f; done
