#!/usr/bin/env python3
"""Summary of a dev/membound/s8_ab.sh job: python3 s8_summary.py LOGDIR.

Bench table (steady GB/s of old and new, two runs each; new/old = ratio of the run means; %copy of
the 1 GiB copy measured in the same process), the fingerprint diff, test and sanitizer results,
and the ncu counts (thread instructions per element = warp instructions x 32 / elements)."""
import csv
import glob
import os
import re
import sys

d = sys.argv[1]
LINE = re.compile(r'^(\S+)\s+(f32|bf16)\s+(\d+)x(\d+)\s+(\d+)\s+\|\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)%')


def bench(path):
    out, copy = {}, None
    if not os.path.exists(path):
        return out, copy
    for line in open(path):
        m = re.search(r'steady ([\d.]+) GB/s', line)
        if m and line.startswith('copy'):
            copy = float(m.group(1))
        m = LINE.match(line)
        if m:
            out[(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)))] = (float(m.group(7)), float(m.group(8)),
                                                                              float(m.group(9)))
    return out, copy


knobs = sorted({re.sub(r'^bench_new_(.*)_\d\.txt$', r'\1', os.path.basename(f))
                for f in glob.glob(os.path.join(d, 'bench_new_*=*_*.txt'))})
runs = {k: [bench(os.path.join(d, 'bench_%s_%d.txt' % (k, i))) for i in (1, 2)]
        for k in ['old', 'new'] + ['new_' + k for k in knobs]}
print('== steady GB/s (copy 1 GiB: old %s, new %s)' % ([r[1] for r in runs['old']], [r[1] for r in runs['new']]))
print('knob columns: (new with the knob) / new, run means: ' + ', '.join('k%d %s' % (i, k) for i, k in enumerate(knobs)))
print('%-18s %-5s %-12s %8s %8s %8s %8s %6s %12s %s' % ('op', 'dt', 'shape', 'old1', 'old2', 'new1', 'new2', 'new/old',
                                                    '%copy o->n', ' '.join('%6s' % ('k%d' % i) for i in range(len(knobs)))))
keys = [k for k in runs['new'][0][0]] or [k for k in runs['old'][0][0]]
for k in keys:
    o = [r[0].get(k) for r in runs['old']]
    n = [r[0].get(k) for r in runs['new']]
    if None in o or None in n:
        print(k, 'missing', o, n)
        continue
    om, nm = (o[0][0] + o[1][0]) / 2, (n[0][0] + n[1][0]) / 2
    kps = []
    for kn in knobs:
        kp = [r[0].get(k) for r in runs['new_' + kn]]
        kps.append('%6.3f' % (((kp[0][0] + kp[1][0]) / 2) / nm) if None not in kp else '%6s' % '')
    kps = ' '.join(kps)
    print('%-18s %-5s %-12s %8.1f %8.1f %8.1f %8.1f %6.3f %5.1f->%5.1f %s' % (
        k[0], k[1], '%dx%d' % (k[2], k[3]), o[0][0], o[1][0], n[0][0], n[1][0], nm / om, (o[0][1] + o[1][1]) / 2,
        (n[0][1] + n[1][1]) / 2, kps))

def lines(name):
    p = os.path.join(d, name)
    return [l.rstrip('\n') for l in open(p)] if os.path.exists(p) else []


bo = lines('bits_old.txt')
for name in ['bits_new.txt'] + ['bits_new_%s.txt' % k for k in knobs]:
    print('\n== fingerprints old vs %s (dev/membound/norm_bits.c)' % name)
    bn = lines(name)
    diff = [(a, b) for a, b in zip(bo, bn) if a != b]
    print('old %d lines, new %d lines, %d differ; repeat differs: old %d new %d; last lines: %r %r' % (
        len(bo), len(bn), len(diff), sum('REPEAT' in l for l in bo), sum('REPEAT' in l for l in bn), bo[-1:], bn[-1:]))
    for a, b in diff[:8]:
        print('  old: %s\n  new: %s' % (a, b))
    if len(diff) > 8:
        print('  ... differing cases: ' + ' | '.join(sorted({b[:40].strip() for a, b in diff})))

print('\n== tests and sanitizer (last lines)')
for f in sorted(glob.glob(os.path.join(d, 'test_gpu_*.log')) + glob.glob(os.path.join(d, 'san_*.log'))):
    lines = [l.rstrip('\n') for l in open(f) if l.strip()]
    summ = [l for l in lines if 'SUMMARY' in l or 'passed' in l.lower() or 'FAIL' in l]
    print('%-40s %s | %s' % (os.path.basename(f), ' / '.join(summ[-3:])[:200], lines[-1] if lines else ''))

print('\n== ncu, bf16 norm backward kernels (one launch each, in bench order)')
shapes = [(4096, 1024), (4096, 4096), (16384, 8192), (1024, 32768), (256, 262144)]
for v in ('old', 'new', 'nbr512', 'partial_8', 'partial_32'):
    p = os.path.join(d, 'ncu_%s.csv' % v)
    if not os.path.exists(p):
        continue
    rows = [r for r in csv.reader(l for l in open(p) if l.startswith('"'))]
    if not rows:
        print(v, 'no csv rows')
        continue
    hdr, body = rows[0], rows[1:]
    ci = {h: i for i, h in enumerate(hdr)}
    kern = {}
    order = []
    for r in body:
        key = (r[ci['ID']], r[ci['Kernel Name']][:40], r[ci['Grid Size']])
        if key not in kern:
            kern[key] = {}
            order.append(key)
        kern[key][r[ci['Metric Name']]] = r[ci['Metric Value']].replace(',', '')
    for i, key in enumerate(order):
        m = kern[key]
        shp = shapes[i // 2] if i // 2 < len(shapes) else (0, 0)
        el = shp[0] * shp[1]
        try:
            ins = float(m.get('smsp__inst_executed.sum', 'nan')) * 32 / el if el else float('nan')
        except ValueError:
            ins = float('nan')
        print('%s %-42s grid %-14s %-12s inst/el %6.1f IPC %s DRAM%% %s wr %s B st %s t %s' % (
            v, key[1], key[2], '%dx%d' % shp, ins, m.get('sm__inst_executed.avg.per_cycle_active'),
            m.get('dram__throughput.avg.pct_of_peak_sustained_elapsed'), m.get('dram__bytes_write.sum'),
            m.get('smsp__inst_executed_op_global_st.sum'), m.get('gpu__time_duration.sum')))
