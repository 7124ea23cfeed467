#!/usr/bin/env python3
"""Where a one-tile-a-CTA launch (split K) ends, CTA by CTA: for each timeline file (timeline.py's input), the times from
the launch's first start (us, by each CTA's clock64 over its globaltimer) of the main loop's end and of the CTA's end,
for the CTAs that stored the tile (consumer 0's epilogue stamped: the split that arrived last) and for the others.

    python3 dev/gemm_sm90/timeline_ends.py DIR/tl_*.txt"""
import statistics
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from timeline import load  # noqa: E402


def q(xs):
    xs = sorted(xs)
    if not xs:
        return "-"
    pick = lambda f: xs[min(len(xs) - 1, int(f * len(xs)))]
    return f"n {len(xs):3d} min {xs[0]:6.2f} p25 {pick(.25):6.2f} med {statistics.median(xs):6.2f} p75 {pick(.75):6.2f} max {xs[-1]:6.2f}"


for path in sys.argv[1:]:
    (M, N, K), meta, ctas = load(path)
    live = [d for d in ctas.values() if "meta" in d and d["meta"][3] > d["meta"][2] > 0 and 0 in d["tiles"]]
    if not live:
        continue
    t0 = min(d["meta"][2] for d in live)
    rows = {"stored": [], "other": []}
    for d in live:
        c0, c1, g0, g1 = d["meta"][0], d["meta"][1], d["meta"][2], d["meta"][3]
        ghz = (c1 - c0) / (g1 - g0)
        at = lambda clk: (g0 + (clk - c0) / ghz - t0) / 1000.0
        e = d["tiles"][0]
        main_end = at(max(e[2], e[4] or 0))
        rows["stored" if e[3] else "other"].append((main_end, (g1 - t0) / 1000.0))
    print(f"{path}: {M}x{N}x{K} splits {meta['splits']} cluster {meta['cluster']} grid {meta['grid']}")
    for k, v in rows.items():
        print(f"  {k:6s} main end  {q([a for a, _ in v])}")
        print(f"  {k:6s} CTA end   {q([b for _, b in v])}")
        print(f"  {k:6s} end - main {q([b - a for a, b in v])}")
