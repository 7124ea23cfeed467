#!/usr/bin/env python3
"""Summary of a dev/membound/run_s15_longnorm.sh job: python3 s15_longnorm_summary.py LOGDIR
(--fake LOGDIR writes made-up logs of the same shape, for the script's DRY mode).

Inputs: bench_{base,new,off}_{round}.json (camel bench membound --ops layernorm_bwd,rmsnorm_bwd --json: steady
GB/s in "ours", cold in "cold_GBps", the 1 GiB copies in meta), test_*.log / san_*.log (last line "rc N").
Prints: checks; per (op, dtype, shape) new/base and off/base (geomean of the rounds' GB/s ratios) and % of the
1 GiB copy base -> new, steady (and cold where measured); the control off/base (CML_NORM_BWD_LONGCLUSTER=0,
must read ~1.00); the decision (README "Session 14 (helper h14d)"), per (op, dtype): keep the one-cluster
kernel where steady new/base >= 1.03 at 256x262144 and no shape of that op and dtype < 0.99; tests and
sanitizers clean."""
import glob
import json
import math
import os
import re
import sys

VARS = ('base', 'new', 'off')
LONG = (256, 262144)


def fake(d):
    import random
    rnd = random.Random(11)
    shapes = ((4096, 1024), (4096, 4096), (16384, 8192), (1024, 32768), (256, 262144))
    for r in (1, 2, 3):
        for v in VARS:
            res = []
            for op in ('layernorm_bwd', 'rmsnorm_bwd'):
                for dt, es in (('f32', 4), ('bf16', 2)):
                    for rows, cols in shapes:
                        b = 3.0 * rows * cols * es
                        g = 2300.0 * (1.2 if v == 'new' and (rows, cols) == LONG else 1.0) * rnd.uniform(0.99, 1.01)
                        res.append({'family': 'membound', 'op': op, 'dtype': dt, 'shape': {'rows': rows, 'cols': cols},
                                    'bytes': b, 'mode': 'steady', 'ours': round(g, 1), 'ratio': g / 3006.0,
                                    'cold_GBps': round(g * 0.95, 1)})
            meta = {'gpu': 'made-up H100', 'copy_GBps': 3006.0, 'copy_steady_GBps': 3006.0, 'copy_cold_GBps': 2990.0}
            with open(os.path.join(d, 'bench_%s_%d.json' % (v, r)), 'w') as f:
                json.dump({'meta': meta, 'results': res}, f)
    for name in ('test_gpu_layernorm', 'test_gpu_rmsnorm', 'san_memcheck_test_gpu_layernorm',
                 'san_racecheck_test_gpu_rmsnorm'):
        with open(os.path.join(d, name + '.log'), 'w') as f:
            f.write('ok   test_longcluster_rows\n  bf16 x 262144: 8 clusters at once\n1/1 tests passed\nrc 0\n')


def geo(q):
    return math.exp(sum(map(math.log, q)) / len(q)) if q else float('nan')


def main(d):
    print('== checks (rc 0 = passed, 77 = skipped, 124 = time box) ==')
    clean = True
    logs = sorted(glob.glob(os.path.join(d, 'test_*.log')) + glob.glob(os.path.join(d, 'san_*.log')))
    for f in logs:
        lines = open(f, errors='replace').read().splitlines()
        rc = next((l.split()[1] for l in reversed(lines) if l.startswith('rc ')), '?')
        passed = next((l for l in reversed(lines) if 'tests passed' in l), '')
        errs = next((l for l in reversed(lines) if 'ERROR SUMMARY' in l or 'RACECHECK SUMMARY' in l), '')
        fails = [l for l in lines if l.startswith('FAIL')][:3]
        clus = ' '.join(l.strip() for l in lines if 'clusters at once' in l)[:200]
        print('  %-46s rc %-4s %s %s %s %s' % (os.path.basename(f)[:-4], rc, passed, errs, ' | '.join(fails), clus))
        if rc != '0':
            clean = False
    if not logs:
        clean = False
        print('  no test logs')
    data, metas = {}, {}
    for f in glob.glob(os.path.join(d, 'bench_*_*.json')):
        m = re.match(r'bench_(\w+?)_(\d+)\.json$', os.path.basename(f))
        if not m or m.group(1) not in VARS:
            continue
        try:
            j = json.load(open(f))
        except (ValueError, OSError) as e:
            print('  %s: unreadable (%s)' % (f, e))
            continue
        key = (m.group(1), int(m.group(2)))
        metas[key] = j['meta']
        data[key] = {(r['op'], r['dtype'], r['shape']['rows'], r['shape']['cols']): r for r in j['results']
                     if r.get('op') in ('layernorm_bwd', 'rmsnorm_bwd')}
    if not data:
        print('no bench JSON\nDECISION: no measurement')
        return
    rounds = sorted({r for _, r in data})
    print('bench runs: ' + ' '.join('%s%d' % k for k in sorted(data, key=lambda k: (k[1], k[0]))))
    pts = sorted({p for rows in data.values() for p in rows}, key=lambda p: (p[0], p[1], p[2] * p[3]))

    def val(v, r, p, mode):
        rec = data.get((v, r), {}).get(p)
        if not rec:
            return None
        g = rec.get('ours') if mode == 'steady' else rec.get('cold_GBps')
        return g if g else None

    def ratio(v, p, mode):
        q = [val(v, r, p, mode) / val('base', r, p, mode) for r in rounds if val(v, r, p, mode) and val('base', r, p, mode)]
        return geo(q) if q else None

    def pct(v, p, mode):
        q = []
        for r in rounds:
            g, meta = val(v, r, p, mode), metas.get((v, r))
            if g and meta:
                c = meta.get('copy_steady_GBps' if mode == 'steady' else 'copy_cold_GBps') or meta.get('copy_GBps')
                if c:
                    q.append(100.0 * g / c)
        return sum(q) / len(q) if q else None

    f3 = lambda x: '%.3f' % x if x is not None else '-'
    f1 = lambda x: '%.1f' % x if x is not None else '-'
    ctrl, keep = [], {}
    for mode in ('steady', 'cold'):
        if not any(val('base', r, p, mode) for r in rounds for p in pts):
            continue
        print('\n== %s: new/base, off/base (geomean of %d rounds); %% of the 1 GiB copy base -> new ==' % (mode, len(rounds)))
        print('  %-14s %-5s %-12s | %8s %8s | %6s -> %6s' % ('op', 'dtype', 'shape', 'new/base', 'off/base', 'base%',
                                                          'new%'))
        for p in pts:
            rn, ro = ratio('new', p, mode), ratio('off', p, mode)
            if ro is not None:
                ctrl.append(ro)
            print('  %-14s %-5s %-12s | %8s %8s | %6s -> %6s' % (p[0], p[1], '%dx%d' % (p[2], p[3]), f3(rn), f3(ro),
                                                                f1(pct('base', p, mode)), f1(pct('new', p, mode))))
            if mode == 'steady' and rn is not None:
                k = keep.setdefault((p[0], p[1]), {'long': None, 'low': 9.0})
                if (p[2], p[3]) == LONG:
                    k['long'] = rn
                k['low'] = min(k['low'], rn)
    if ctrl:
        print('\ncontrol off/base (CML_NORM_BWD_LONGCLUSTER=0 vs base): geomean %.3f, range %.3f - %.3f (must be ~1.00)'
              % (geo(ctrl), min(ctrl), max(ctrl)))
    print('\nDECISION (keep per op/dtype where steady new/base >= 1.03 at 256x262144 and no shape < 0.99; tests and '
          'sanitizers %s):' % ('clean' if clean else 'NOT CLEAN'))
    for (op, dt), k in sorted(keep.items()):
        ok = clean and k['long'] is not None and k['long'] >= 1.03 and k['low'] >= 0.99
        print('  %-14s %-5s 256x262144 %s, lowest %s -> %s' % (op, dt, f3(k['long']), f3(k['low']),
                                                              'KEEP' if ok else 'DO NOT KEEP'))


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--fake':
        fake(sys.argv[2])
    else:
        main(sys.argv[1])
