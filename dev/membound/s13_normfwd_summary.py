#!/usr/bin/env python3
"""Summary of a dev/membound/run_s13_normfwd.sh job: python3 s13_normfwd_summary.py LOGDIR
(--fake LOGDIR writes made-up logs of the same shape, for the script's DRY mode).

Bench (camel bench membound --ops layernorm,rmsnorm): GB/s of base (base tree), n0 / n1 / n2 (new tree,
CML_NORM_FWD_V2=0 / 1 / 2; 2 is the default), steady and cold, means over the rounds; n0/base (must be
~1: the same kernels), n1/base (hardware pack), n2/base (pack + residency), n2/n1; the share of the
1 GiB copy of base and n2 (each run's own copy line) and n2's share of a same-size copy.
Fingerprints (norm_bits): base vs n0 / n1 / n2, all must be equal. ptxas of the forward kernels, tests,
sanitizers, ncu of the bf16 forward kernels under n0 and n2."""
import csv
import glob
import math
import os
import re
import sys

LINE = re.compile(r'^(\S+)\s+(f32|bf16|f16)\s+(\d+)x(\d+)\s+(\d+)\s+\|\s+[\d.]+\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)%\s+\d+'
                  r'\s+\|\s+[\d.]+\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)%')
COPY = re.compile(r'^copy D2D 1 GiB.*steady ([\d.]+) GB/s.*cold ([\d.]+) GB/s')
SHAPES = [(4096, 1024), (4096, 4096), (16384, 8192), (1024, 32768), (256, 262144)]
VARS = ('base', 'n0', 'n1', 'n2')
RATIOS = (('n0', 'base'), ('n1', 'base'), ('n2', 'base'), ('n2', 'n1'))


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
                for op in ('layernorm', 'rmsnorm'):
                    for dt in ('f32', 'bf16'):
                        for r, c in SHAPES:
                            up = 1.0 if dt == 'f32' else {'base': 1.0, 'n0': 1.0, 'n1': 1.08, 'n2': 1.10}[v]
                            g = 2300 * up * rnd.uniform(0.98, 1.02)
                            f.write('%-24s %-5s %6dx%-7d %5.0f | %9.4f %7.1f %5.1f%% %5.1f%% %4d | %9.4f %7.1f '
                                    '%5.1f%% %5.1f%%\n' % (op, dt, r, c, 64, 0.03, g, 100 * g / 3006.1,
                                                           100 * g / 2700, 8, 0.035, g * 0.96,
                                                           100 * g * 0.96 / 3003.1, 100 * g * 0.96 / 2650))
    for tag in VARS:
        with open(os.path.join(d, 'bits_%s.txt' % tag), 'w') as f:
            f.write('ln_fwd bf16 4096x1024                    out0   0123456789abcdef\nrc 0\n')
    for t in ('test_gpu_layernorm', 'test_gpu_rmsnorm'):
        for k in ('fwd_v2_default', 'fwd_v2_CML_NORM_FWD_V2-0', 'whole_default'):
            with open(os.path.join(d, '%s_%s.log' % (t, k)), 'w') as f:
                f.write('9/9 tests passed\nrc 0\n')
        for tool in ('memcheck', 'racecheck'):
            with open(os.path.join(d, 'san_%s_%s.log' % (tool, t)), 'w') as f:
                f.write('1/1 tests passed\n========= ERROR SUMMARY: 0 errors\nrc 0\n')
    with open(os.path.join(d, 'ptxas_layernorm_fwd.log'), 'w') as f:
        f.write("ptxas info    : Compiling entry function '_Z19ln_fwd_words_kernelILi2ELi4ELi2EEvPvPfS1_PKvS3_S3_xif'"
                " for 'sm_90a'\nptxas info    : Function properties for _Z19ln_fwd_words_kernelILi2ELi4ELi2EEvPvPfS1_"
                "PKvS3_S3_xif\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nptxas info    "
                ": Used 40 registers, used 1 barriers, 256 bytes smem\nrc 0\n")
    metrics = (('gpu__time_duration.sum', 'nsecond', '30100'), ('launch__grid_size', '', '2048'),
               ('launch__block_size', '', '256'), ('launch__registers_per_thread', 'register/thread', '40'),
               ('sm__warps_active.avg.pct_of_peak_sustained_active', '%', '61.2'),
               ('sm__inst_executed.avg.per_cycle_active', 'inst/cycle', '1.63'),
               ('smsp__inst_executed.sum', 'inst', '8,000,000'),
               ('dram__throughput.avg.pct_of_peak_sustained_elapsed', '%', '81.5'),
               ('smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio', '', '0.41'),
               ('smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio', '', '5.2'))
    for v in ('n0', 'n2'):
        with open(os.path.join(d, 'ncu_%s.csv' % v), 'w') as f:
            f.write('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n')
            for i, kn in enumerate(('ln_fwd_words_kernelILi2ELi4ELi%s' % v[1], 'ln_fwd_words_kernelILi2ELi8ELi1',
                                    'ln_fwd_onepass_kernelILi2ELi%s' % v[1], 'rms_fwd_words_kernelILi2ELi4ELi%s' % v[1],
                                    'rms_fwd_onepass_kernelILi2ELb1') * 2):
                for m, u, x in metrics:
                    f.write('"%d","_Z19%sEEvPvPfS1_PKvS3_S3_xif","%s","%s","%s"\n' % (i, kn, m, u, x))


def bench(path):
    out, copy = {}, None
    if os.path.exists(path):
        for line in open(path):
            m = COPY.match(line)
            if m:
                copy = (float(m.group(1)), float(m.group(2)))
            m = LINE.match(line)
            if m:
                g = [float(m.group(i)) for i in range(6, 12)]
                # steady GB/s, %copy, %size; cold GB/s, %copy, %size
                out[(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)))] = g
    return out, copy


def lines(p):
    return [l.rstrip('\n') for l in open(p)] if os.path.exists(p) else []


def kname(name):
    m = re.search(r'(ln|rms)_fwd_(words|onepass|rows|stats|apply)_kernelI(.*?)EEv', name)
    if m:
        args = re.sub(r'Li|Lb|E', ' ', m.group(3)).split()
        return '%s_%s<%s>' % (m.group(1), m.group(2), ','.join(args))
    return name[:40]


def ncu_table(d, tag):
    p = os.path.join(d, '%s.csv' % tag)
    rows = [r for r in csv.reader(l for l in open(p) if l.startswith('"'))] if os.path.exists(p) else []
    if not rows:
        print(tag, 'no rows;', ' '.join(lines(os.path.join(d, '%s.err' % tag))[-3:]))
        return
    h = rows[0]
    ix = {name: h.index(name) for name in h}
    per = {}
    for r in rows[1:]:
        key = (r[ix['ID']], kname(r[ix['Kernel Name']]))
        v = r[ix['Metric Value']]
        if r[ix['Metric Name']] == 'gpu__time_duration.sum':
            v += r[ix['Metric Unit']] if 'Metric Unit' in ix else ''
        per.setdefault(key, {})[r[ix['Metric Name']]] = v
    short = {'gpu__time_duration.sum': 'dur', 'launch__grid_size': 'grid', 'launch__block_size': 'blk',
             'launch__registers_per_thread': 'reg', 'sm__warps_active.avg.pct_of_peak_sustained_active': 'occ%',
             'sm__inst_executed.avg.per_cycle_active': 'ipc', 'smsp__inst_executed.sum': None,
             'dram__throughput.avg.pct_of_peak_sustained_elapsed': 'dram%',
             'smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio': 'bar',
             'smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio': 'lsb'}
    # elements of a bf16 launch by its grid (the bench's shapes): thread instructions per element
    elems = {'512': 4096 * 1024, '2048': 4096 * 4096, '16384': 16384 * 8192, '1024': 1024 * 32768,
             '4096': 256 * 262144}

    def num(x):
        try:
            v = float(x.replace(',', ''))
            return '%d' % v if v == int(v) else '%.3g' % v
        except ValueError:
            return x

    for key, m in per.items():
        extra = ''
        try:
            n = elems.get(m.get('launch__grid_size', '').replace(',', ''))
            w = float(m.get('smsp__inst_executed.sum', 'x').replace(',', ''))
            if n:
                extra = ' in/el=%.1f' % (w * 32 / n)
        except ValueError:
            pass
        print('%-3s %-17s %s%s' % (tag[4:], key[1], ' '.join(
            '%s=%s' % (short.get(k, k), m[k] if k == 'gpu__time_duration.sum' else num(m[k]))
            for k in m if short.get(k, k)), extra))


def main(d):
    rounds = sorted({int(re.sub(r'.*_(\d+)\.txt$', r'\1', f)) for f in glob.glob(os.path.join(d, 'bench_n2_*.txt'))})
    runs = {v: [bench(os.path.join(d, 'bench_%s_%d.txt' % (v, i))) for i in rounds] for v in VARS}
    print('== copy 1 GiB steady / cold GB/s by round: %s' % '; '.join(
        '%s %s' % (v, ' '.join('%s/%s' % c if c else 'none' for _, c in runs[v])) for v in VARS))

    print('\n== ptxas of new (mode 1/2 kernels: registers; any C75xx / spill line of the two files)')
    for f in sorted(glob.glob(os.path.join(d, 'ptxas_*.log'))):
        cur, regs = None, []
        for l in lines(f):
            m = re.search(r"Function properties for (\S+)", l)
            if m:
                cur = m.group(1)
            if 'C75' in l or 'spilled' in l or ('spill stores' in l and
                                                not l.strip().startswith('0 bytes stack frame, 0 bytes spill')):
                print('  %s: %s' % (os.path.basename(f), l.strip()[:150]))
            m = re.search(r'Used (\d+) registers', l)
            if m and cur and re.search(r'(words|onepass)_kernelI.*(Li[12]EEv|Lb1EEv)', cur):
                regs.append('%s=%s' % (kname(cur).replace('_kernel', ''), m.group(1)))
        print('  %s (%s): %s' % (os.path.basename(f)[6:-4], lines(f)[-1] if lines(f) else 'no log', ' '.join(regs)))

    print('\n== tests (new) and sanitizers (test_fwd_v2 alone)')
    tests_ok = True
    for f in sorted(os.listdir(d)):
        if f.endswith('.log') and (f.startswith('test_') or f.startswith('san_')):
            ls = lines(os.path.join(d, f))
            keep = [l for l in ls if re.search(r'tests passed|SUMMARY|^rc |FAIL', l)]
            tests_ok = tests_ok and bool(ls) and ls[-1] == 'rc 0'
            print('%-46s %s' % (f[:-4].replace('test_gpu_', '')[:46], ' | '.join(keep[-4:])[:110]))

    print('\n== fingerprints (norm_bits: every norm fwd/bwd path, f32/bf16/f16; all must equal base)')
    base = lines(os.path.join(d, 'bits_base.txt'))
    bits_ok = True
    for tag in VARS[1:]:
        n = lines(os.path.join(d, 'bits_%s.txt' % tag))
        diff = sum(a != b for a, b in zip(base, n)) + abs(len(base) - len(n))
        bits_ok = bits_ok and diff == 0 and len(base) > 1
        print('base vs %-3s %d / %d lines, %d differ, repeat differs %d, %s' %
              (tag, len(base), len(n), diff, sum('REPEAT' in l for l in n), n[-1] if n else 'no log'))
        for x, y in [(x, y) for x, y in zip(base, n) if x != y][:3]:
            print('  base: %s\n  %-4s: %s' % (x, tag, y))

    print('\n== ncu, bf16 forward kernels, n0 then n2 (cold, --cache-control none; dur, regs, occupancy, IPC, DRAM %,'
          ' stalls per issue: bar / lsb = long scoreboard; in/el = thread instructions per element)')
    for tag in ('ncu_n0', 'ncu_n2'):
        ncu_table(d, tag)

    def vals(v, k, j):
        return [r[0][k][j] for r in runs[v] if k in r[0]]

    def mean(v, k, j):
        xs = vals(v, k, j)
        return sum(xs) / len(xs) if xs else float('nan')

    def spread(v, k, j):
        xs = vals(v, k, j)
        return (max(xs) - min(xs)) / (sum(xs) / len(xs)) if len(xs) > 1 else float('nan')

    keys = []
    for v in VARS:
        for r in runs[v]:
            keys += [k for k in r[0] if k not in keys]
    worst, geo = {}, {}
    for j, mname in ((3, 'cold'), (0, 'steady')):
        full = mname == 'steady'
        print('\n== bench %s, %d rounds in turns (GB/s means; n0/n1/n2 = new tree with CML_NORM_FWD_V2=0/1/2, 2 the '
              'default; copy = share of the 1 GiB copy base -> n2; size = n2 / same-size copy; sp = spread of n2)'
              % (mname, len(rounds)))
        if full:
            print('%-9s %-4s %-11s|%7s %7s %7s %7s |%6s %6s %6s %6s | copy b->n2  size  sp' % (
                ('op', 'dt', 'shape') + VARS + tuple('%s/%s' % (a, b[0] if b == 'base' else b) for a, b in RATIOS)))
        else:
            print('%-9s %-4s %-11s|%6s %6s %6s %6s | copy b->n2' % (
                ('op', 'dt', 'shape') + tuple('%s/%s' % (a, b[0] if b == 'base' else b) for a, b in RATIOS)))
        for k in keys:
            g = {v: mean(v, k, j) for v in VARS}
            rat = [g[a] / g[b] if g[b] else float('nan') for a, b in RATIOS]
            for (a, b), x in zip(RATIOS, rat):
                if not math.isnan(x):
                    geo.setdefault((mname, k[1], a, b), []).append(math.log(x))
                    if (a, b) == ('n2', 'base'):
                        worst[(mname, k)] = x
            head = '%-9s %-4s %-11s|' % (k[0][:9], k[1], '%dx%d' % (k[2], k[3]))
            if full:
                print('%s%s |%s | %4.1f->%4.1f %5.1f %5.3f' % (
                    head, ' '.join('%7.1f' % g[v] for v in VARS), ' '.join('%6.3f' % x for x in rat),
                    mean('base', k, j + 1), mean('n2', k, j + 1), mean('n2', k, j + 2), spread('n2', k, j)))
            else:
                print('%s%s | %4.1f->%4.1f' % (head, ' '.join('%6.3f' % x for x in rat), mean('base', k, j + 1),
                                               mean('n2', k, j + 1)))

    print('\n== decision inputs: bits equal %s; tests + sanitizers rc 0 %s' % (bits_ok, tests_ok))
    for mname in ('cold', 'steady'):
        print('geomean %-6s %s' % (mname, '  '.join(
            '%s %s/%s %.3f' % (dt, a, b, math.exp(sum(x) / len(x))) for (m, dt, a, b), x in sorted(geo.items())
            if m == mname and (a, b) in (('n1', 'base'), ('n2', 'base'), ('n2', 'n1')))))
        w = sorted((x, k) for (m, k), x in worst.items() if m == mname)
        if w:
            print('n2/base %-6s min %.3f (%s %s %dx%d), max %.3f (%s %s %dx%d); rows < 0.99: %d of %d' % (
                mname, w[0][0], w[0][1][0], w[0][1][1], w[0][1][2], w[0][1][3], w[-1][0], w[-1][1][0], w[-1][1][1],
                w[-1][1][2], w[-1][1][3], sum(x < 0.99 for x, _ in w), len(w)))


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--fake':
        fake(sys.argv[2])
    else:
        main(sys.argv[1])
