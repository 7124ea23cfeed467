#!/usr/bin/env bash
# Session 31: the column of 4 in the tree (camel-c4, test_gpu_gemm-c4: the estimate's rule and test_sm90_column4). The
# new test alone and under memcheck / racecheck / synccheck, test_gpu_gemm whole, then in turns against the tree before
# (camel-base): the odd set (every op pair, bf16 / fp16; 4 rounds) and bf16 squares + GPT-2 (2 rounds).
#   run(carry=["build-s31x"], command="XDIR=build-s31x bash dev/gemm_sm90/run_s31_c4b.sh")
set -u
XDIR=${XDIR:-build-s31x}
X=${OUT:-/tmp}/x
. "$(dirname "$0")/../carried.sh"
unpack camel-base camel-c4 test_gpu_gemm-c4
mv /tmp/bin/test_gpu_gemm-c4 /tmp/bin/test_gpu_gemm
CML_TEST_ONLY=test_sm90_column4 timeout 120 /tmp/bin/test_gpu_gemm >$X/test_column4_only.log 2>&1
echo "rc $?" >>$X/test_column4_only.log
run_tests gemm &
sanitize /tmp/bin/test_gpu_gemm test_sm90_column4
wait
tests_summary
tail -5 $X/test_column4_only.log
mkdir -p $X/odd $X/sg
X0=$X
X=$X0/odd in_turns 4 "base c4" bench gemm --dtype bf16,fp16 --set odd --ops NN,NT,TN,TT --reps 20
X=$X0/sg in_turns 2 "base c4" bench gemm --dtype bf16 --set square,gpt2 --sizes 1024,2048,4096,8192 --reps 20
X=$X0
python3 - $X <<'PY'
import json, sys, glob, statistics, collections
for sub in ("odd", "sg"):
    rows = collections.defaultdict(list)
    for f in glob.glob(f"{sys.argv[1]}/{sub}/bench_*_*.json"):
        v = f.split("/")[-1].split("_")[1]
        for r in json.load(open(f))["results"]:
            s = r["shape"]
            key = (r["dtype"], f"{r['name'][:10]} {s['M']}x{s['N']}x{s['K']} {s.get('op_a','')}{s.get('op_b','')}")
            rows[key + (v,)].append((r["ours_ms"], r.get("ref_ms"), r.get("path")))
    for key in sorted({k[:2] for k in rows}):
        b, c = rows[key + ("base",)], rows[key + ("c4",)]
        mb, mc = statistics.median(x[0] for x in b), statistics.median(x[0] for x in c)
        ref = statistics.median(x[1] for x in b + c if x[1])
        print(f"{key[0]:5} {key[1]:34} base {mb:.4f} c4 {mc:.4f} ms  {mb / mc:.4f}x  to cuBLASLt {ref / mb:.3f} -> {ref / mc:.3f}  [{c[0][2]}]")
PY
