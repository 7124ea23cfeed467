#!/usr/bin/env python3
"""One line per profiled kernel launch of an `ncu --csv --page details` export: name, grid, cluster, duration,
DRAM bytes and throughput, L2 / L1 hit rates and throughput, SM throughput, and the top warp stall reasons.
   python3 ncu_details.py NCU.csv"""
import csv
import sys

WANT = [('Grid Size', 'grid'), ('Cluster Size', 'cluster'), ('Duration', 'us'), ('DRAM Throughput', 'dram%'),
        ('Memory Throughput', 'dramMB'), ('L2 Hit Rate', 'L2hit%'), ('L1/TEX Hit Rate', 'L1hit%'),
        ('Compute (SM) Throughput', 'sm%'), ('Mem Busy', 'membusy%'), ('Max Bandwidth', 'maxbw%'),
        ('Warp Cycles Per Issued Instruction', 'cpi')]


def main(path):
    rows = list(csv.reader(open(path, errors='replace')))
    hdr = next((r for r in rows if r and r[0] == 'ID'), None)
    if not hdr:
        print('no ncu rows in', path)
        return
    ix = {h: i for i, h in enumerate(hdr)}
    kern = {}
    for r in rows:
        if len(r) <= ix['Metric Value'] or r[0] == 'ID' or not r[ix['Metric Name']]:
            continue  # rule rows carry no metric
        k = (r[ix['ID']], r[ix['Kernel Name']])
        name, unit, val = r[ix['Metric Name']], r[ix['Metric Unit']], r[ix['Metric Value']]
        d = kern.setdefault(k, {'Grid Size': (r[ix['Grid Size']].strip('()').split(',')[0], '')})
        d[name] = (val, unit)
    print('%-4s %-46s ' % ('id', 'kernel') + ' '.join('%9s' % w for _, w in WANT) + '  stalls')
    for (i, name), m in sorted(kern.items(), key=lambda x: int(x[0][0])):
        vals = []
        for metric, _ in WANT:
            v, u = m.get(metric, ('-', ''))
            if metric == 'Memory Throughput' and v != '-' and 'byte' in u and 'Duration' in m:
                # SpeedOfLight's "Memory Throughput" is DRAM bytes a second here: times the duration = DRAM bytes
                dv, du = m['Duration']
                dur_s = float(dv.replace(',', '')) * {'ns': 1e-9, 'nsecond': 1e-9, 'us': 1e-6, 'usecond': 1e-6,
                                                      'ms': 1e-3, 'msecond': 1e-3}.get(du, 1e-9)
                scale = {'byte/second': 1, 'Kbyte/second': 1e3, 'Mbyte/second': 1e6, 'Gbyte/second': 1e9,
                         'Tbyte/second': 1e12}.get(u, 1)
                v = '%.1f' % (float(v.replace(',', '')) * scale * dur_s / 1e6)
            elif metric == 'Duration' and v != '-':
                f = float(v.replace(',', ''))
                v = '%.1f' % (f / 1000 if u in ('ns', 'nsecond') else f * 1000 if u in ('ms', 'msecond') else f)
            vals.append('%9s' % v[:9])
        st = sorted(((float(v.replace(',', '')), n) for n, (v, u) in m.items()
                     if n.startswith('Stall ') and v.replace(',', '').replace('.', '').isdigit()), reverse=True)[:3]
        print('%-4s %-46s ' % (i, name[:46]) + ' '.join(vals) + '  ' + ', '.join('%s %.1f' % (n[6:], v) for v, n in st))


if __name__ == '__main__':
    main(sys.argv[1])
