#!/usr/bin/env python3
"""A/B summary of `camel bench gemm` runs: files DIR/bench_{VAR}_{ROUND}.txt of two variants (base, new).
Per case: the ratio to cuBLAS(Lt) per round, base -> new, new speed / base speed (geomean of the rounds) and
the plans; then per dtype and set the geomean ratio to cuBLAS of each variant.
usage: bench_ab.py DIR [BASE NEW]"""
import glob, math, os, re, sys

d = sys.argv[1]
va, vb = (sys.argv[2:4] if len(sys.argv) > 3 else ("base", "new"))
runs = {}  # (var, round) -> {case: (ms, ratio, plan)}
for f in glob.glob(os.path.join(d, "bench_*_*.txt")):
    m = re.match(r"bench_(\w+?)_(\d+)\.txt$", os.path.basename(f))
    if not m or m.group(1) not in (va, vb):
        continue
    rows = {}
    for line in open(f):
        t = line.split()
        if len(t) >= 17 and t[9] == "sm90" and re.match(r"^\d+$", t[4]):
            case = (t[0], t[1], t[2], t[3], f"{t[4]}x{t[5]}x{t[6]}", t[7], t[8])
            plan = " ".join(t[10:-5])  # tile, cluster and "tuned" where the table chose it
            rows[case] = (float(t[-5]), float(t[-2]), plan)
    runs[(m.group(1), int(m.group(2)))] = rows
geo = lambda q: math.exp(sum(map(math.log, q)) / len(q)) if q else float("nan")
rounds = sorted({r for _, r in runs})
cases = []
for rows in runs.values():
    cases += [c for c in rows if c not in cases]
print(f"== camel bench gemm A/B ({va} -> {vb}); ratio = cuBLAS ms / ours ms per round; {vb}/{va} = speed, geomean")
groups = {}
for c in cases:
    pairs = [(runs[(va, r)][c], runs[(vb, r)][c]) for r in rounds
             if c in runs.get((va, r), {}) and c in runs.get((vb, r), {})]
    if not pairs:
        continue
    sp = geo([a[0] / b[0] for a, b in pairs])
    print(f"{c[0]:5s} {c[2]:9s} {c[3]:10s} {c[4]:17s} b{c[5]:3s} {c[6]:3s} " +
          " ".join(f"{a[1]:.3f}->{b[1]:.3f}" for a, b in pairs) +
          f"  {vb}/{va} {sp:.3f}  {pairs[0][0][2]} -> {pairs[0][1][2]}")
    g = groups.setdefault((c[0], c[1] + (" " + c[6] if c[1] == "square" else "")), ([], []))
    g[0].append(geo([a[1] for a, _ in pairs]))
    g[1].append(geo([b[1] for _, b in pairs]))
for (dt, s), (a, b) in sorted(groups.items()):
    print(f"geomean ratio to cuBLAS {dt:5s} {s:10s} ({len(a):2d} cases): {va} {geo(a):.3f}  {vb} {geo(b):.3f}")
