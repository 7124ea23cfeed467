#!/usr/bin/env python3
"""Summary of a dev/membound/run_s16_nbrwide.sh job: python3 s16_nbrwide_summary.py LOGDIR
(--fake LOGDIR writes made-up logs of the same shape, for the script's DRY mode).

Inputs: bench_{base,new,off,all,k4}_{round}.json (camel bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
--json: steady time "ms", cold time "cold_ms", the 1 GiB copies in meta), test_*.log / san_*.log (last line "rc N").
Ratios are by TIME: base_ms / variant_ms (> 1 = the variant is faster), geomean over the rounds. Variants: new = the
patch's defaults (CML_NORM_BWD_WIDE unset: nbw_kernel for 16-bit rows of 257..512 words), off = CML_NORM_BWD_WIDE=0
(the control: the base's kernels, must read ~1.00), all = CML_NORM_BWD_WIDE=all (also f32 and rows up to 1024 words:
f32 4096x4096, bf16 16384x8192), k4 = CML_NORM_BWD_WIDE=k4 (4 words a thread, 512 threads, everywhere it fits).
DECISION (fixed before the run, README "Session 15 (helper h15a)"), per (op, dtype) of 16-bit storage: keep the
default where steady base/new >= 1.03 at 4096x4096, cold base/new >= 1.00 there, no shape of that op and dtype
< 0.99 (steady), and tests and sanitizers clean. all / k4 are information for a next step, not kept by this run."""
import glob
import json
import math
import os
import re
import sys

VARS = ('base', 'new', 'off', 'all', 'k4')
TARGET = (4096, 4096)


def fake(d):
    import random
    rnd = random.Random(16)
    shapes = ((4096, 1024), (4096, 4096), (16384, 8192), (1024, 32768), (256, 262144))
    for r in (1, 2, 3):
        for v in VARS:
            res = []
            for op in ('layernorm_bwd', 'rmsnorm_bwd'):
                for dt, es in (('f32', 4), ('bf16', 2)):
                    for rows, cols in shapes:
                        b = 3.0 * rows * cols * es
                        fast = v in ('new', 'all', 'k4') and (rows, cols) == TARGET and dt == 'bf16'
                        g = 2100.0 * (1.15 if fast else 1.0) * rnd.uniform(0.99, 1.01)
                        ms = b / g / 1e6
                        res.append({'family': 'membound', 'op': op, 'dtype': dt, 'shape': {'rows': rows, 'cols': cols},
                                    'bytes': b, 'mode': 'steady', 'ms': ms, 'ours': round(g, 1), 'ratio': g / 3006.0,
                                    'cold_ms': ms * 1.08, 'cold_GBps': round(g / 1.08, 1)})
            meta = {'gpu': 'made-up H100', 'copy_GBps': 3006.0, 'copy_steady_GBps': 3006.0, 'copy_cold_GBps': 2990.0}
            with open(os.path.join(d, 'bench_%s_%d.json' % (v, r)), 'w') as f:
                json.dump({'meta': meta, 'results': res}, f)
    for name in ('test_gpu_layernorm', 'test_gpu_rmsnorm', 'san_memcheck_test_gpu_layernorm',
                 'san_racecheck_test_gpu_rmsnorm'):
        with open(os.path.join(d, name + '.log'), 'w') as f:
            f.write('ok   test_wide_rows\n1/1 tests passed\nrc 0\n')


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
        print('  %-46s rc %-4s %s %s %s' % (os.path.basename(f)[:-4], rc, passed, errs, ' | '.join(fails)))
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

    def ms(v, r, p, mode):
        rec = data.get((v, r), {}).get(p)
        if not rec:
            return None
        t = rec.get('ms') if mode == 'steady' else rec.get('cold_ms')
        return t if t else None

    def speed(v, p, mode):  # base time / variant time, geomean over the rounds with both
        q = [ms('base', r, p, mode) / ms(v, r, p, mode) for r in rounds if ms(v, r, p, mode) and ms('base', r, p, mode)]
        return geo(q) if q else None

    def pct(v, p, mode):  # % of the 1 GiB copy
        q = []
        for r in rounds:
            t, meta, rec = ms(v, r, p, mode), metas.get((v, r)), data.get((v, r), {}).get(p)
            if t and meta and rec:
                c = meta.get('copy_steady_GBps' if mode == 'steady' else 'copy_cold_GBps') or meta.get('copy_GBps')
                if c:
                    q.append(100.0 * rec['bytes'] / (t * 1e-3) / 1e9 / c)
        return sum(q) / len(q) if q else None

    f3 = lambda x: '%.3f' % x if x is not None else '-'
    f1 = lambda x: '%.1f' % x if x is not None else '-'
    ctrl, keep = [], {}
    for mode in ('steady', 'cold'):
        if not any(ms('base', r, p, mode) for r in rounds for p in pts):
            continue
        print('\n== %s, by time: base/variant (> 1 = faster; geomean of %d rounds); %% of the 1 GiB copy base -> new =='
              % (mode, len(rounds)))
        print('  %-14s %-5s %-12s | %8s %8s %8s %8s | %6s -> %6s' % ('op', 'dtype', 'shape', 'new', 'off', 'all', 'k4',
                                                                    'base%', 'new%'))
        for p in pts:
            s = {v: speed(v, p, mode) for v in VARS[1:]}
            if s['off'] is not None and mode == 'steady':
                ctrl.append(s['off'])
            print('  %-14s %-5s %-12s | %8s %8s %8s %8s | %6s -> %6s' % (
                p[0], p[1], '%dx%d' % (p[2], p[3]), f3(s['new']), f3(s['off']), f3(s['all']), f3(s['k4']),
                f1(pct('base', p, mode)), f1(pct('new', p, mode))))
            if s['new'] is not None:
                k = keep.setdefault((p[0], p[1]), {'t': None, 'tc': None, 'low': 9.0, 'lowp': ''})
                if (p[2], p[3]) == TARGET:
                    k['t' if mode == 'steady' else 'tc'] = s['new']
                if mode == 'steady' and s['new'] < k['low']:
                    k['low'], k['lowp'] = s['new'], '%dx%d' % (p[2], p[3])
    if ctrl:
        print('\ncontrol off (CML_NORM_BWD_WIDE=0) vs base, steady: geomean %.3f, range %.3f - %.3f (must be ~1.00)'
              % (geo(ctrl), min(ctrl), max(ctrl)))
    print('\nDECISION (per 16-bit op: keep the default where steady base/new >= 1.03 at 4096x4096, cold >= 1.00 there, '
          'no shape < 0.99; tests and sanitizers %s):' % ('clean' if clean else 'NOT CLEAN'))
    for (op, dt), k in sorted(keep.items()):
        if dt == 'f32':
            continue
        ok = clean and k['t'] is not None and k['t'] >= 1.03 and (k['tc'] is None or k['tc'] >= 1.00) and k['low'] >= 0.99
        print('  %-14s %-5s 4096x4096 steady %s cold %s, lowest %s (%s) -> %s' % (
            op, dt, f3(k['t']), f3(k['tc']), f3(k['low']), k['lowp'], 'KEEP' if ok else 'DO NOT KEEP (CML_NORM_BWD_WIDE '
            'default off for it: nbw_geometry mode 1)'))
    print('information (not decided here): all / k4 at the shapes the default does not take')
    for p in pts:
        if (p[1], p[2], p[3]) in (('f32', 4096, 4096), ('bf16', 16384, 8192), ('bf16', 4096, 4096)):
            print('  %-14s %-5s %-12s all %s k4 %s (steady), all %s k4 %s (cold)' % (
                p[0], p[1], '%dx%d' % (p[2], p[3]), f3(speed('all', p, 'steady')), f3(speed('k4', p, 'steady')),
                f3(speed('all', p, 'cold')), f3(speed('k4', p, 'cold'))))


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--fake':
        fake(sys.argv[2])
    else:
        main(sys.argv[1])
