#!/usr/bin/env python3
"""Summary of a dev/membound/run_s12a.sh job: python3 s12a_summary.py LOGDIR
(--fake LOGDIR writes made-up logs of the same shape, for the script's DRY mode).

Bench: GB/s of base (base tree), d0 (new, CML_NORM_BWD_DEFER=0) and d1 (new, =1), steady and cold,
means over the rounds; d1/d0 and d1/base per shape. Fingerprints (norm_bits): base vs d0 vs d1 (and
with CLUSTER=0), tests, sanitizer summaries, ptxas lines of nbl_kernel, ncu of nbl_kernel."""
import csv
import glob
import os
import re
import sys

LINE = re.compile(r'^(\S+)\s+(f32|bf16)\s+(\d+)x(\d+)\s+(\d+)\s+\|\s+[\d.]+\s+([\d.]+)\s+[\d.]+%\s+[\d.]+%\s+\d+'
                  r'\s+\|\s+[\d.]+\s+([\d.]+)\s')
SHAPES = [(4096, 1024), (4096, 4096), (16384, 8192), (1024, 32768), (256, 262144)]
VARS = ('base', 'd0', 'd1')


def fake(d):
    """Made-up logs (DRY mode): what the summary must parse."""
    import random
    rnd = random.Random(1)
    for v in VARS:
        for i in (1, 2, 3):
            with open(os.path.join(d, 'bench_%s_%d.txt' % (v, i)), 'w') as f:
                f.write('copy D2D 1 GiB (read + write): steady 3006.1 GB/s cold 3003.1 GB/s\n\n')
                f.write('op                       dtype rows x cols      MiB | steady ms    GB/s  %copy  %size sets'
                        ' |   cold ms    GB/s  %copy  %size\n')
                for op in ('layernorm_bwd', 'rmsnorm_bwd'):
                    for dt in ('f32', 'bf16'):
                        for r, c in SHAPES:
                            g = 2000 * (1.1 if v == 'd1' and c == 262144 else 1.0) * rnd.uniform(0.98, 1.02)
                            f.write('%-24s %-5s %6dx%-7d %5.0f | %9.4f %7.1f %5.1f%% %5.1f%% %4d | %9.4f %7.1f '
                                    '%5.1f%% %5.1f%%\n' % (op, dt, r, c, 64, 0.03, g, 66.0, 70.0, 8, 0.035, g * 0.96,
                                                           64.0, 69.0))
    for tag in ('base', 'CML_NORM_BWD_DEFER-0', 'CML_NORM_BWD_DEFER-1', 'CML_NORM_BWD_CLUSTER-0_CML_NORM_BWD_DEFER-0',
                'CML_NORM_BWD_CLUSTER-0_CML_NORM_BWD_DEFER-1'):
        with open(os.path.join(d, 'bits_%s.txt' % tag), 'w') as f:
            f.write('layernorm_bwd bf16 256x262144            out0   0123456789abcdef\nrc 0\n')
    for t in ('test_gpu_layernorm', 'test_gpu_rmsnorm'):
        for k in ('default', 'CML_NORM_BWD_DEFER-1'):
            with open(os.path.join(d, '%s_%s.log' % (t, k)), 'w') as f:
                f.write('7/7 tests passed\nrc 0\n')
        for tool in ('memcheck', 'racecheck'):
            with open(os.path.join(d, 'san_%s_%s.log' % (tool, t)), 'w') as f:
                f.write('7/7 tests passed\n========= ERROR SUMMARY: 0 errors\nrc 0\n')
    with open(os.path.join(d, 'ptxas_layernorm_bwd.log'), 'w') as f:
        f.write("ptxas info    : Compiling entry function '_Z10nbl_kernelILi2ELb1ELi4ELb1EEvPvPfPKvS3_S3_PKfS5_PjPyxxii'"
                " for 'sm_90a'\nptxas info    : Function properties for _Z10nbl_kernelILi2ELb1ELi4ELb1EEvPvPfPKvS3_S3"
                "_PKfS5_PjPyxxii\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nptxas info    "
                ": Used 128 registers, used 1 barriers, 528 bytes smem\nrc 0\n")


def bench(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            m = LINE.match(line)
            if m:
                out[(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)))] = (float(m.group(6)), float(m.group(7)))
    return out


def lines(p):
    return [l.rstrip('\n') for l in open(p)] if os.path.exists(p) else []


def main(d):
    rounds = sorted({int(re.sub(r'.*_(\d+)\.txt$', r'\1', f)) for f in glob.glob(os.path.join(d, 'bench_d1_*.txt'))})
    runs = {v: [bench(os.path.join(d, 'bench_%s_%d.txt' % (v, i))) for i in rounds] for v in VARS}
    for v in VARS:
        for i in rounds:
            c = [l for l in lines(os.path.join(d, 'bench_%s_%d.txt' % (v, i))) if l.startswith('copy')]
            print('%s %d: %s' % (v, i, c[0] if c else 'no copy line'))

    def mean(v, k, mode):
        xs = [r[k][mode] for r in runs[v] if k in r]
        return sum(xs) / len(xs) if xs else float('nan')

    def spread(v, k, mode):
        xs = [r[k][mode] for r in runs[v] if k in r]
        return (max(xs) - min(xs)) / (sum(xs) / len(xs)) if len(xs) > 1 else float('nan')

    print('\n== bench (GB/s means of %d rounds; sp = (max - min) / mean of d1; d1 = CML_NORM_BWD_DEFER=1)'
          % len(rounds))
    print('%-14s %-5s %-11s | %7s %7s %7s %6s %6s %5s | %7s %7s %7s %6s %6s %5s' %
          ('op', 'dt', 'shape', 'base', 'd0', 'd1', 'd1/d0', 'd1/bs', 'sp', 'c-base', 'c-d0', 'c-d1', 'd1/d0',
           'd1/bs', 'sp'))
    keys = list(runs['d1'][0]) if rounds and runs['d1'][0] else []
    for k in keys:
        row = '%-14s %-5s %-11s' % (k[0], k[1], '%dx%d' % (k[2], k[3]))
        for mode in (0, 1):
            b, z, o = (mean(v, k, mode) for v in VARS)
            row += ' | %7.1f %7.1f %7.1f %6.3f %6.3f %5.3f' % (b, z, o, o / z if z else float('nan'),
                                                              o / b if b else float('nan'), spread('d1', k, mode))
        print(row)

    print('\n== fingerprints (dev/membound/norm_bits.c; must all be equal)')
    base = lines(os.path.join(d, 'bits_base.txt'))
    for tag in ('CML_NORM_BWD_DEFER-0', 'CML_NORM_BWD_DEFER-1'):
        n = lines(os.path.join(d, 'bits_%s.txt' % tag))
        print('base vs new %-45s %d / %d lines, %d differ, repeat differs %d' %
              (tag, len(base), len(n), sum(a != b for a, b in zip(base, n)), sum('REPEAT' in l for l in n)))
    a = lines(os.path.join(d, 'bits_CML_NORM_BWD_CLUSTER-0_CML_NORM_BWD_DEFER-0.txt'))
    b = lines(os.path.join(d, 'bits_CML_NORM_BWD_CLUSTER-0_CML_NORM_BWD_DEFER-1.txt'))
    print('new CLUSTER=0: DEFER=0 vs DEFER=1 %d / %d lines, %d differ' % (len(a), len(b),
                                                                         sum(x != y for x, y in zip(a, b))))
    for x, y in [(x, y) for x, y in zip(base, lines(os.path.join(d, 'bits_CML_NORM_BWD_DEFER-1.txt'))) if x != y][:8]:
        print('  base: %s\n  d1:   %s' % (x, y))

    print('\n== ptxas (nbl_kernel: registers, spills; any C75xx warning)')
    for f in sorted(glob.glob(os.path.join(d, 'ptxas_*.log'))):
        cur = None
        for l in lines(f):
            m = re.search(r"Function properties for (\S+)", l)
            if m:
                cur = m.group(1)
            if 'C75' in l or 'spilled' in l:
                print('  %s: %s' % (os.path.basename(f), l.strip()[:150]))
            if cur and 'nbl_kernel' in cur and ('Used' in l or 'spill stores' in l):
                m2 = re.search(r'nbl_kernelILi(\d)ELb(\d)ELi(\d)ELb(\d)', cur)
                tag = 'DT%s LN%s KW%s DEFER%s' % m2.groups() if m2 else cur[:40]
                print('  %-28s %s' % (tag, l.strip()[:90]))

    print('\n== tests and sanitizer (last lines)')
    for f in sorted(os.listdir(d)):
        if f.endswith('.log') and (f.startswith('test_') or f.startswith('san_')):
            keep = [l for l in lines(os.path.join(d, f)) if re.search(r'tests passed|SUMMARY|^rc |FAIL', l)]
            print('%-58s %s' % (f, ' | '.join(keep[-4:])))

    print('\n== ncu nbl_kernel (cold bench, one launch per configuration)')
    for v in ('d0', 'd1'):
        p = os.path.join(d, 'ncu_%s.csv' % v)
        rows = [r for r in csv.reader(l for l in open(p) if l.startswith('"'))] if os.path.exists(p) else []
        if not rows:
            print(v, 'no rows;', ' '.join(lines(os.path.join(d, 'ncu_%s.err' % v))[-3:]))
            continue
        h = rows[0]
        ix = {name: h.index(name) for name in h}
        per = {}
        for r in rows[1:]:
            m2 = re.search(r'nbl_kernelILi(\d)ELb(\d)ELi(\d)ELb(\d)', r[ix['Kernel Name']])
            key = (r[ix['ID']], 'DT%s LN%s KW%s D%s' % m2.groups() if m2 else r[ix['Kernel Name']][:30])
            per.setdefault(key, {})[r[ix['Metric Name']]] = r[ix['Metric Value']]
        for key, m in per.items():
            print('%s %-4s %-18s %s' % (v, key[0], key[1], ' '.join('%s=%s' % (k.split('.')[0].split('__')[-1], m[k])
                                                                    for k in sorted(m))))


if __name__ == '__main__':
    if sys.argv[1] == '--fake':
        fake(sys.argv[2])
    else:
        main(sys.argv[1])
