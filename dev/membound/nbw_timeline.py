#!/usr/bin/env python3
"""Summarizes a timeline of nbw_kernel (a build with -DCML_NBW_DEV_TIMELINE=1 run with CML_NBW_TL=FILE:
norm_bwd_wide.cuh, layernorm_bwd.cu): where a group's time goes, row by row, and what the SMs do over the launch.

    python3 dev/membound/nbw_timeline.py FILE

Each group (blocks x R groups) stamps its rows' top, the end of its pass-1 sum and the end of its wait for the next
row's copies (clock64, put on the launch's time axis by each block's clock64 / %globaltimer at its start and end).
Per row index n (the group's n-th row): the medians over groups of the row's start, pass 1 (top -> sum), and pass 2
+ wait (sum -> next row in). Then, in 1 us bins, how many groups are in pass 1 and how many in pass 2 + wait."""
import statistics
import sys
from collections import defaultdict


def main(path):
    lines = open(path).read().split("\n")
    head = lines[0].split()
    meta = dict(zip(head[0::2], (int(x) for x in head[1::2])))
    ev = defaultdict(dict)  # (block, group) -> n -> (top, sum, in)
    cal = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        b, g, n, a, s, i = (int(x) for x in line.split())
        if g == 8:
            c = cal.setdefault(b, {})
            if n == 0:
                c["c0"], c["g0"], c["c1"] = a, s, i
            else:
                c["g1"] = a
        else:
            ev[(b, g)][n] = (a, s, i)
    t0 = min(c["g0"] for c in cal.values())
    conv = {}
    for b, c in cal.items():
        rate = (c["c1"] - c["c0"]) / max(1, c["g1"] - c["g0"])  # cycles a ns
        conv[b] = (lambda c, rate: lambda clk: (c["g0"] + (clk - c["c0"]) / rate - t0) / 1000.0)(c, rate)
    ends = sorted((c["g1"] - t0) / 1000.0 for c in cal.values())
    ghz = statistics.median((c["c1"] - c["c0"]) / max(1, c["g1"] - c["g0"]) for c in cal.values())
    print(f"{path}: rows {meta['rows']} C {meta['C']} blocks {meta['nb']} x {meta['R']} groups; clock {ghz:.3f} GHz; "
          f"block ends (us from the first start) min {ends[0]:.2f} median {ends[len(ends) // 2]:.2f} max {ends[-1]:.2f}")
    rows = defaultdict(list)
    spans = []  # (start, end, kind)
    for (b, g), d in ev.items():
        at = conv[b]
        for n, (a, s, i) in sorted(d.items()):
            rows[n].append((at(a), at(s) - at(a), at(i) - at(s)))
            spans.append((at(a), at(s), 1))
            spans.append((at(s), at(i), 2))
    print("  row  groups  start(us)  pass1(us)  pass2+wait(us)   (medians over groups)")
    for n in sorted(rows):
        r = rows[n]
        print(f"  {n:3d} {len(r):7d} {statistics.median(x[0] for x in r):10.2f} {statistics.median(x[1] for x in r):10.2f}"
              f" {statistics.median(x[2] for x in r):15.2f}")
    last = max(e for _, e, _ in spans)
    print("  time(us)  groups in pass 1 / in pass 2 + wait (mean over the bin)")
    for t in range(int(last) + 1):
        p1 = sum(max(0.0, min(e, t + 1) - max(s, t)) for s, e, k in spans if k == 1)
        p2 = sum(max(0.0, min(e, t + 1) - max(s, t)) for s, e, k in spans if k == 2)
        print(f"  {t:7d} {p1:10.1f} {p2:10.1f}")


for p in sys.argv[1:]:
    main(p)
