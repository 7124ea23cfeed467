#!/usr/bin/env python3
"""Summary of a dev/membound/run_s13_norm.sh job: python3 s13_norm_summary.py LOGDIR
(--fake LOGDIR writes made-up logs of the same shape, for the script's DRY mode).

Bench: GB/s of base (base tree), n (new, defaults), p (CML_NORM_BWD_PSUM=1), e (PSUM=1 DEFER=2),
f (FUSED=all KW=2: plan B step 0), steady and cold, means over the rounds, with p/n, e/n, e/p, n/base,
f/n. Fingerprints (norm_bits): base vs n / p / e / CLUSTER=0 e (must be equal), f (new bits: shown).
ptxas of nbl_kernel and the partial sums, tests, sanitizers, ncu."""
import csv
import glob
import os
import re
import sys

LINE = re.compile(r'^(\S+)\s+(f32|bf16)\s+(\d+)x(\d+)\s+(\d+)\s+\|\s+[\d.]+\s+([\d.]+)\s+[\d.]+%\s+[\d.]+%\s+\d+'
                  r'\s+\|\s+[\d.]+\s+([\d.]+)\s')
SHAPES = [(4096, 1024), (4096, 4096), (16384, 8192), (1024, 32768), (256, 262144)]
VARS = ('base', 'n', 'p', 'e', 'f')
RATIOS = (('p', 'n'), ('e', 'n'), ('e', 'p'), ('n', 'base'), ('f', 'n'))


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
                            g = 2000 * (1.05 if v in 'pe' else 1.0) * rnd.uniform(0.98, 1.02)
                            f.write('%-24s %-5s %6dx%-7d %5.0f | %9.4f %7.1f %5.1f%% %5.1f%% %4d | %9.4f %7.1f '
                                    '%5.1f%% %5.1f%%\n' % (op, dt, r, c, 64, 0.03, g, 66.0, 70.0, 8, 0.035, g * 0.96,
                                                           64.0, 69.0))
    for tag in ('base', 'n', 'p', 'e', 'c0e', 'f'):
        with open(os.path.join(d, 'bits_%s.txt' % tag), 'w') as f:
            f.write('layernorm_bwd bf16 256x262144            out0   %s\nrc 0\n'
                    % ('fedcba9876543210' if tag == 'f' else '0123456789abcdef'))
    for t in ('test_gpu_layernorm', 'test_gpu_rmsnorm'):
        for k in ('default', 'CML_NORM_BWD_PSUM-1'):
            with open(os.path.join(d, '%s_%s.log' % (t, k)), 'w') as f:
                f.write('8/8 tests passed\nrc 0\n')
        for tool in ('memcheck', 'racecheck'):
            with open(os.path.join(d, 'san_%s_%s_test_partial_sums.log' % (tool, t)), 'w') as f:
                f.write('1/1 tests passed\n========= ERROR SUMMARY: 0 errors\nrc 0\n')
    with open(os.path.join(d, 'ptxas_layernorm_bwd.log'), 'w') as f:
        f.write("ptxas info    : Compiling entry function '_Z10nbl_kernelILi2ELb1ELi4ELi2EEvPvPfPKvS3_S3_PKfS5_PjPyxxii'"
                " for 'sm_90a'\nptxas info    : Function properties for _Z10nbl_kernelILi2ELb1ELi4ELi2EEvPvPfPKvS3_S3"
                "_PKfS5_PjPyxxii\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nptxas info    "
                ": Used 128 registers, used 1 barriers, 528 bytes smem\nrc 0\n")
    with open(os.path.join(d, 'ncu_n.csv'), 'w') as f:
        f.write('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
                '"0","_Z10nbl_kernelILi2ELb1ELi4ELi0EEv","gpu__time_duration.sum","us","190.1"\n'
                '"0","_Z10nbl_kernelILi2ELb1ELi4ELi0EEv","launch__grid_size","","256"\n'
                '"1","_Z21nb_partial_sum_kernelILi2ELi2EEvPvS0_Pfixb","gpu__time_duration.sum","us","13.3"\n')


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


def kname(name):
    m = re.search(r'nbl_kernelILi(\d)ELb(\d)ELi(\d)ELi(\d)', name)
    if m:
        return 'nbl DT%s LN%s KW%s D%s' % m.groups()
    m = re.search(r'(nb_partial_sum\w*?_kernel|\w*rows_kernel|nbr_kernel)I(.*?)EEv', name)
    if m:
        return '%s<%s>' % (m.group(1), re.sub(r'Li|Lb|E', ' ', m.group(2)).split().__str__().replace("'", '')[1:-1])
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
        per.setdefault(key, {})[r[ix['Metric Name']]] = r[ix['Metric Value']]
    short = {'gpu__time_duration.sum': 'us', 'launch__grid_size': 'grid', 'launch__block_size': 'blk',
             'sm__inst_executed.avg.per_cycle_active': 'ipc',
             'dram__throughput.avg.pct_of_peak_sustained_elapsed': 'dram%', 'lts__t_sector_hit_rate.pct': 'l2hit%',
             'smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio': 'bar',
             'smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio': 'lsb',
             'smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio': 'ssb'}
    for key, m in per.items():
        print('%-5s %-4s %-34s %s' % (tag, key[0], key[1], ' '.join('%s=%s' % (short.get(k, k), m[k]) for k in m)))


def main(d):
    rounds = sorted({int(re.sub(r'.*_(\d+)\.txt$', r'\1', f)) for f in glob.glob(os.path.join(d, 'bench_n_*.txt'))})
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

    keys = list(runs['n'][0]) if rounds and runs['n'][0] else []
    for mode, mname in ((0, 'steady'), (1, 'cold')):
        print('\n== bench %s (GB/s means of %d rounds; sp = (max - min) / mean of e; n = new defaults, p = PSUM=1, '
              'e = PSUM=1 DEFER=2, f = FUSED=all KW=2)' % (mname, len(rounds)))
        print('%-14s %-5s %-11s | %7s %7s %7s %7s %7s | %s %5s' % (
            ('op', 'dt', 'shape') + VARS + (' '.join('%6s' % ('%s/%s' % r) for r in RATIOS), 'sp')))
        for k in keys:
            g = {v: mean(v, k, mode) for v in VARS}
            rat = ' '.join('%6.3f' % (g[a] / g[b] if g[b] else float('nan')) for a, b in RATIOS)
            print('%-14s %-5s %-11s | %s | %s %5.3f' % (k[0], k[1], '%dx%d' % (k[2], k[3]),
                                                        ' '.join('%7.1f' % g[v] for v in VARS), rat,
                                                        spread('e', k, mode)))

    print('\n== fingerprints (dev/membound/norm_bits.c; n, p, e, c0e must equal base; f = plan B step 0, new bits)')
    base = lines(os.path.join(d, 'bits_base.txt'))
    for tag in ('n', 'p', 'e', 'c0e', 'f'):
        n = lines(os.path.join(d, 'bits_%s.txt' % tag))
        print('base vs %-4s %d / %d lines, %d differ, repeat differs %d, %s' %
              (tag, len(base), len(n), sum(a != b for a, b in zip(base, n)), sum('REPEAT' in l for l in n),
               n[-1] if n else 'no log'))
    for x, y in [(x, y) for x, y in zip(base, lines(os.path.join(d, 'bits_e.txt'))) if x != y][:8]:
        print('  base: %s\n  e:    %s' % (x, y))

    print('\n== ptxas (nbl_kernel, nb_partial*: registers, spills; any C75xx / spill warning)')
    for f in sorted(glob.glob(os.path.join(d, 'ptxas_*.log'))):
        cur = None
        for l in lines(f):
            m = re.search(r"Function properties for (\S+)", l)
            if m:
                cur = m.group(1)
            if 'C75' in l or 'spilled' in l:
                print('  %s: %s' % (os.path.basename(f), l.strip()[:150]))
            if cur and ('nbl_kernel' in cur or 'nb_partial' in cur) and ('Used' in l or 'spill stores' in l):
                if 'spill stores' in l and l.strip().startswith('0 bytes stack frame, 0 bytes spill stores'):
                    continue
                print('  %-5s %-34s %s' % (os.path.basename(f)[6:9], kname(cur), l.strip()[14:80]))
        print('  %s: %s' % (os.path.basename(f), lines(f)[-1] if lines(f) else 'no log'))

    print('\n== tests and sanitizer (last lines)')
    for f in sorted(os.listdir(d)):
        if f.endswith('.log') and (f.startswith('test_') or f.startswith('san_')):
            keep = [l for l in lines(os.path.join(d, f)) if re.search(r'tests passed|SUMMARY|^rc |FAIL', l)]
            print('%-66s %s' % (f[:66], ' | '.join(keep[-4:])))

    print('\n== ncu (cold bench, --cache-control none, one launch per configuration; us, IPC, stalls per issue:'
          ' bar = barrier, lsb = long scoreboard)')
    for tag in ('ncu_n', 'ncu_e', 'ncuB_n', 'ncuB_f'):
        ncu_table(d, tag)


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--fake':
        fake(sys.argv[2])
    else:
        main(sys.argv[1])
