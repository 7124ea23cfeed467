#!/usr/bin/env python3
"""Summary of an in-turns A/B of `camel bench membound` runs: python3 ab_summary.py LOGDIR [BASE]

Reads LOGDIR/bench_{variant}_{round}.json (camel bench membound --json --mode both: steady "ms", cold "cold_ms") and
prints, per (op, dtype, shape), the base time over each variant's time (> 1 = the variant is faster) as the
geomean over the rounds that have both, the range over rounds, and % of the same-size copy (steady) before and
after; then each variant's geomean over all shapes. BASE names the reference variant (default "base")."""
import glob
import json
import math
import os
import re
import sys
from collections import defaultdict


def geo(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float('nan')


def main(d, base='base'):
    runs = defaultdict(dict)  # variant -> round -> {(op, dtype, shape): row}
    for f in sorted(glob.glob(os.path.join(d, 'bench_*_*.json'))):
        m = re.match(r'bench_(.+)_(\d+)\.json$', os.path.basename(f))
        try:
            rows = json.load(open(f))['results']
        except (OSError, ValueError, KeyError):
            continue
        runs[m.group(1)][int(m.group(2))] = {
            (r['op'], r['dtype'], '%dx%d' % (r['shape']['rows'], r['shape']['cols'])): r for r in rows
            if 'rows' in r.get('shape', {})}
    if base not in runs:
        print('no %s runs in %s' % (base, d))
        return
    variants = [v for v in sorted(runs) if v != base]
    keys = sorted({k for rr in runs[base].values() for k in rr})
    print('time %s / time variant (steady; cold in brackets), geomean over rounds [min..max]; %%size = %% of a '
          'same-size copy, %s -> variant' % (base, base))
    allr = defaultdict(list)
    for k in keys:
        line = '%-14s %-4s %-12s' % k
        for v in variants:
            st, co, sz0, sz1 = [], [], [], []
            for r, rr in runs[v].items():
                b = runs[base].get(r, {}).get(k)
                n = rr.get(k)
                if not b or not n:
                    continue
                st.append(b['ms'] / n['ms'])
                if b.get('cold_ms') and n.get('cold_ms'):
                    co.append(b['cold_ms'] / n['cold_ms'])
                sz0.append(b['size_ratio'])
                sz1.append(n['size_ratio'])
            if st:
                allr[v].append(geo(st))
                line += '  %s %.3f [%.3f..%.3f] (%.3f) %%size %.1f->%.1f' % (
                    v, geo(st), min(st), max(st), geo(co) if co else float('nan'), 100 * geo(sz0), 100 * geo(sz1))
        print(line)
    for v in variants:
        print('%s: geomean over %d shapes %.4f, min %.3f, max %.3f' % (
            v, len(allr[v]), geo(allr[v]), min(allr[v] or [0]), max(allr[v] or [0])))


if __name__ == '__main__':
    main(sys.argv[1], *(sys.argv[2:3]))
