#!/usr/bin/env python3
"""Session 26: a GEMM CTA's start-up in parts, from a timeline build's dumps (gemm_sm90_kernel.cuh, slot 14 of the
dev timeline): clocks after the barriers' init and cluster sync (t0 = META 0), relative to t0 -- thread 0 past the
tile count's code (its parameter loads are not ordered before the stamp), the producer warpgroup's register hand-back, its tensor-map prefetches, its
first tile located (META 7), consumer 0's registers taken, its first tile begun; medians over CTAs.
    python3 dev/gemm_sm90/startup_parts.py DIR/tl_*.txt"""
import statistics
import sys


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float('nan')


for path in sys.argv[1:]:
    lines = open(path).read().split('\n')
    head = lines[0]
    ctas = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        f = [int(x) for x in line.split()]
        ctas.setdefault(f[0], {})[f[1]] = f[2:]
    rel = {k: [] for k in ('entry', 'total', 'dealloc', 'prefetch', 'located', 'alloc', 'tile0', 'landed')}
    for c, d in ctas.items():
        m, x, t = d.get(-1), d.get(14), d.get(0)
        if not m or not m[0] or not x or not x[0]:
            continue
        t0 = m[0]
        rel['entry'].append(m[6] - t0 if m[6] else None)
        rel['total'].append(x[0] - t0)
        rel['dealloc'].append(x[1] - t0 if x[1] else None)
        rel['prefetch'].append(x[2] - t0 if x[2] else None)
        rel['located'].append(m[7] - t0 if m[7] else None)
        rel['alloc'].append(x[3] - t0 if x[3] else None)
        rel['tile0'].append(t[0] - t0 if t and t[0] else None)
        rel['landed'].append(t[1] - t0 if t and t[1] else None)
    print(head.split(' bn ')[0].replace('shape ', ''), ' '.join('%s %.0f' % (k, med(v)) for k, v in rel.items()))
