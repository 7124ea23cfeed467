#!/usr/bin/env python3
"""Second half of the s10_ab.sh summary: python3 s10_summary.py LOGDIR.

Per dtype and shape, from the means of the two runs of each build (bench_{old,new,new_KNOB}_{1,2}.txt):
the amax's extra time (convert_scaled_e4m3_amax ms - convert_scaled_e4m3 ms, in us; steady / cold)
and each op's share of the 1 GiB copy (steady %copy column), old -> new."""
import glob
import os
import re
import sys

d = sys.argv[1]
# op dtype RxC MiB | steady ms GB/s %copy %size sets | cold ms GB/s %copy %size
LINE = re.compile(r'^(\S+)\s+(f32|bf16)\s+(\d+x\d+)\s+(\d+)\s+\|\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%\s+[\d.]+%\s+\d+'
                  r'\s+\|\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%')


def bench(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            m = LINE.match(line)
            if m:
                out[(m.group(1), m.group(2), m.group(3))] = (float(m.group(5)), float(m.group(8)), float(m.group(7)))
    return out


def mean(v, key, i):
    xs = [r[key][i] for r in v if key in r]
    return sum(xs) / len(xs) if xs else float('nan')


knobs = sorted({re.sub(r'^bench_new_(.*)_\d\.txt$', r'\1', os.path.basename(f))
                for f in glob.glob(os.path.join(d, 'bench_new_*=*_*.txt'))})
builds = ['old', 'new'] + ['new_' + k for k in knobs]
runs = {v: [bench(os.path.join(d, 'bench_%s_%d.txt' % (v, i))) for i in (1, 2)] for v in builds}
P, A = 'convert_scaled_e4m3', 'convert_scaled_e4m3_amax'
shapes = [(k[1], k[2]) for k in runs['new'][0] if k[0] == P] or [(k[1], k[2]) for k in runs['old'][0] if k[0] == P]
print('\n== amax extra time (us, amax ms - plain ms, run means; steady / cold) and % of the 1 GiB copy (steady)')
labels = ['old', 'new'] + ['k%d' % i for i in range(len(knobs))]
print('columns: old, new' + ''.join(', k%d = new with %s' % (i, k) for i, k in enumerate(knobs)))
print('%-5s %-12s | %-30s | %-40s | %s' % ('dt', 'shape', 'amax extra us: ' + ' '.join(labels),
                                          'plain %copy', 'amax %copy'))
for dt, sh in shapes:
    ex = []
    for b in builds:
        s = (mean(runs[b], (A, dt, sh), 0) - mean(runs[b], (P, dt, sh), 0)) * 1e3
        c = (mean(runs[b], (A, dt, sh), 1) - mean(runs[b], (P, dt, sh), 1)) * 1e3
        ex.append('%.1f/%.1f' % (s, c))
    pc = ' '.join('%.1f' % mean(runs[b], (P, dt, sh), 2) for b in builds)
    ac = ' '.join('%.1f' % mean(runs[b], (A, dt, sh), 2) for b in builds)
    print('%-5s %-12s | %-30s | %-40s | %s' % (dt, sh, ' '.join(ex), pc, ac))
