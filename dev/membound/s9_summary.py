#!/usr/bin/env python3
"""Summary of a dev/membound/s9_ab.sh job: python3 s9_summary.py LOGDIR.

Bench table (GB/s of old and new, steady and cold, two runs each; new/old = ratio of the run
means), the fingerprint diff, test and sanitizer results, and the ncu counts (thread instructions
per element = warp instructions x 32 / elements of the launch)."""
import csv
import glob
import os
import re
import sys

d = sys.argv[1]
LINE = re.compile(r'^(\S+)\s+(f32|bf16)\s+(\d+)x(\d+)\s+(\d+)\s+\|\s+[\d.]+\s+([\d.]+)\s+[\d.]+%\s+[\d.]+%\s+\d+'
                  r'\s+\|\s+[\d.]+\s+([\d.]+)\s')


def bench(path):
    out, copy = {}, ''
    if not os.path.exists(path):
        return out, copy
    for line in open(path):
        if line.startswith('copy'):
            copy = line.strip()
        m = LINE.match(line)
        if m:
            out[(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)))] = (float(m.group(6)), float(m.group(7)))
    return out, copy


knobs = sorted({re.sub(r'^bench_new_(.*)_\d\.txt$', r'\1', os.path.basename(f))
                for f in glob.glob(os.path.join(d, 'bench_new_*=*_*.txt'))})
runs = {v: [bench(os.path.join(d, 'bench_%s_%d.txt' % (v, i))) for i in (1, 2)]
        for v in ['old', 'new'] + ['new_' + k for k in knobs]}
print('knob columns: steady / cold GB/s of (new with the knob) over new, run means: ' +
      ', '.join('k%d %s' % (i, k) for i, k in enumerate(knobs)))
for v in ('old', 'new'):
    for i, r in enumerate(runs[v]):
        print('%s %d: %s' % (v, i + 1, r[1]))
print('%-25s %-5s %-12s | %7s %7s %7s %7s %6s | %7s %7s %7s %7s %6s' %
      ('op', 'dt', 'shape', 'old1', 'old2', 'new1', 'new2', 'n/o', 'c-old1', 'c-old2', 'c-new1', 'c-new2', 'n/o'))
keys = list(runs['new'][0][0]) or list(runs['old'][0][0])
for k in keys:
    row = '%-25s %-5s %-12s' % (k[0], k[1], '%dx%d' % (k[2], k[3]))
    for mode in (0, 1):
        vals = [runs[v][i][0].get(k, (float('nan'),) * 2)[mode] for v in ('old', 'new') for i in (0, 1)]
        ratio = (vals[2] + vals[3]) / (vals[0] + vals[1]) if vals[0] + vals[1] > 0 else float('nan')
        row += ' | %7.1f %7.1f %7.1f %7.1f %6.3f' % (*vals, ratio)
    for kn in knobs:
        r = []
        for mode in (0, 1):
            kv = [runs['new_' + kn][i][0].get(k, (float('nan'),) * 2)[mode] for i in (0, 1)]
            nv = [runs['new'][i][0].get(k, (float('nan'),) * 2)[mode] for i in (0, 1)]
            r.append(sum(kv) / sum(nv) if sum(nv) > 0 else float('nan'))
        row += ' | %6.3f %6.3f' % tuple(r)
    print(row)

print('\n== fingerprints old vs new (dev/membound/s9_bits.c)')
def lines(p):
    return [l.rstrip('\n') for l in open(p)] if os.path.exists(p) else []
for kn in knobs:
    a, b = lines(os.path.join(d, 'bits_new.txt')), lines(os.path.join(d, 'bits_new_%s.txt' % kn))
    print('new vs new with %s: %d / %d lines, %d differ' % (kn, len(a), len(b), sum(x != y for x, y in zip(a, b))))
o, n = lines(os.path.join(d, 'bits_old.txt')), lines(os.path.join(d, 'bits_new.txt'))
diff = [(a, b) for a, b in zip(o, n) if a != b]
print('old %d lines, new %d lines, %d differ; repeat differs: old %d new %d; last lines: %s %s' %
      (len(o), len(n), len(diff), sum('REPEAT' in l for l in o), sum('REPEAT' in l for l in n), o[-1:], n[-1:]))
for a, b in diff[:20]:
    print('  old: %s\n  new: %s' % (a, b))

print('\n== tests and sanitizer (last lines)')
for f in sorted(os.listdir(d)):
    if f.endswith('.log') and (f.startswith('test_') or f.startswith('san_')):
        ls = lines(os.path.join(d, f))
        keep = [l for l in ls if re.search(r'tests passed|SUMMARY|^rc |FAIL', l)]
        print('%-40s %s' % (f, ' | '.join(keep[-4:])))

print('\n== ncu (one launch per kernel and launch configuration)')
for v in ('old', 'new'):
    p = os.path.join(d, 'ncu_%s.csv' % v)
    if not os.path.exists(p):
        continue
    rows = [r for r in csv.reader(l for l in open(p) if l.startswith('"'))]
    if not rows:
        print(v, 'no rows;', ' '.join(lines(os.path.join(d, 'ncu_%s.err' % v))[-3:]))
        continue
    h = rows[0]
    ix = {name: h.index(name) for name in h}
    per = {}
    for r in rows[1:]:
        key = (r[ix['ID']], r[ix['Kernel Name']][:60], r[ix.get('Grid Size', 0)] if 'Grid Size' in ix else '')
        per.setdefault(key, {})[r[ix['Metric Name']]] = r[ix['Metric Value']]
    for key, m in per.items():
        print('%s %-4s %-60s grid %-14s %s' % (v, key[0], key[1], key[2],
                                             ' '.join('%s=%s' % (k.split('.')[0].split('__')[-1], m[k])
                                                      for k in sorted(m))))
