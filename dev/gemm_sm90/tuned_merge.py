#!/usr/bin/env python3
"""Merge a `camel tune gemm` run into the tuned table: a case the run wrote a row for takes the run's row; every
other row stays, also of cases the run tuned without writing a row (their best was within 2% of the estimate's
plan in the run's quick timing; session 13: dropping such a row cost bf16 NN 8192 x 3072 x 768 2% in the A/B).
usage: tuned_merge.py OLD.inc RUN.inc RUN.json OUT.inc"""
import json, re, sys

KIND = {"bf16": "BF16", "fp16": "F16", "tf32": "TF32", "e4m3": "E4M3", "e5m2": "E5M2"}
ROW = re.compile(r"^CML_SM90_TUNED\((\w+), '(\w)', '(\w)', (\d+), (\d+), (\d+), (\d+),")


def key(line):
    m = ROW.match(line)
    return m and (m.group(1), m.group(2), m.group(3)) + tuple(int(v) for v in m.group(4, 5, 6, 7))


old_path, run_path, json_path, out_path = sys.argv[1:5]
run_rows = [l for l in open(run_path) if key(l)]
tuned = {key(l) for l in run_rows}
n_cases = len(json.load(open(json_path))["results"])
command = next((l for l in open(run_path) if "Written by" in l), "").strip(" */\n")
out, dropped, kept = [], 0, 0
for line in open(old_path):
    k = key(line)
    if k and k in tuned:
        dropped += 1
        continue
    kept += bool(k)
    out.append(line)
out.append(f"/* re-tuned rows ({command}) */\n")
out += run_rows
open(out_path, "w").writelines(out)
print(f"tuned_merge: {n_cases} cases tuned, {len(run_rows)} rows written, {dropped} old rows replaced, {kept} kept")
