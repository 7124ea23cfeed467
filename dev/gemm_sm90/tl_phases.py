#!/usr/bin/env python3
"""Session 30: where a CTA's life goes, summed over its tiles, from the GEMM timelines (timeline.py's files):
start-up (entry to tile 0's first stage landed), main loops (first stage landed -> main loop end), epilogues (main loop
end -> epilogue end), between tiles (epilogue end -> the next tile's first stage landed), tail (last epilogue end ->
exit); medians over CTAs in us at the measured clock. Also how many tiles a CTA ran.

    python3 dev/gemm_sm90/tl_phases.py DIR/tl_*.txt"""
import statistics
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location("timeline_mod", __file__.rsplit("/", 1)[0] + "/timeline.py")
_argv, sys.argv = sys.argv, sys.argv[:1]  # timeline.py summarizes its argv on import
_tl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tl)
sys.argv = _argv
load = _tl.load


def phases(path):
    (M, N, K), meta, ctas = load(path)
    live = [d for d in ctas.values() if "meta" in d and d["meta"][3] > d["meta"][2] > 0]
    ghz = statistics.median([(d["meta"][1] - d["meta"][0]) / (d["meta"][3] - d["meta"][2]) for d in live])
    rows = []
    for d in live:
        t = [d["tiles"][s] for s in sorted(d["tiles"]) if s < 14]  # slot 14: the start-up parts
        if not t or not all(e[1] and e[2] and e[3] for e in t):
            continue
        start = t[0][1] - d["meta"][0]
        main = sum(e[2] - e[1] for e in t)
        epi = sum(e[3] - e[2] for e in t)
        between = sum(t[i + 1][1] - t[i][3] for i in range(len(t) - 1))
        tail = d["meta"][1] - t[-1][3]
        life = d["meta"][1] - d["meta"][0]
        rows.append((start, main, epi, between, tail, life, len(t)))
    med = lambda i: statistics.median(r[i] for r in rows) / ghz / 1000
    span = (max(d["meta"][3] for d in live) - min(d["meta"][2] for d in live)) / 1000
    print(f"{path}: {M}x{N}x{K} grid {meta['grid']} span {span:.2f} us clock {ghz:.3f} GHz; tiles a CTA "
          f"{statistics.median(r[6] for r in rows):.0f}; us (median over CTAs): start {med(0):.2f} main {med(1):.2f} "
          f"epi {med(2):.2f} between {med(3):.2f} tail {med(4):.2f} life {med(5):.2f}")


for p in sys.argv[1:]:
    phases(p)
