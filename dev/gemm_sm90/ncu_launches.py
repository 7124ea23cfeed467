#!/usr/bin/env python3
"""One line per profiled launch of an `ncu --csv --metrics ...` (raw page) export, in launch order: kernel, grid,
cluster, duration (us), DRAM read / write and L2 bytes (MB), SM and tensor-pipe throughput (%), SM clock (GHz).
Lines of the bench's own output (case names, ratios) that precede the CSV are echoed first.
   python3 ncu_launches.py NCU.csv"""
import csv
import sys

COLS = [('launch__grid_size', 'grid', 1), ('launch__cluster_dim_x', 'cl', 1), ('gpu__time_duration.sum', 'us', 1e-3),
        ('dram__bytes_read.sum', 'drdMB', 1e-6), ('dram__bytes_write.sum', 'dwrMB', 1e-6),
        ('lts__t_bytes.sum', 'l2MB', 1e-6), ('lts__t_sector_hit_rate.pct', 'l2hit%', 1), ('sm__throughput.avg.pct_of_peak_sustained_elapsed', 'sm%', 1),
        ('gpc__cycles_elapsed.avg.per_second', 'GHz', 1e-9)]


def num(s):
    try:
        return float(s.replace(',', ''))
    except ValueError:
        return None


def main(path):
    lines = open(path, errors='replace').read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    for l in lines[:start]:
        if not l.startswith('==PROF==') and not l.startswith('==WARNING=='):
            print('  ' + l)
    if start is None:
        print('no ncu rows')
        return
    rows = list(csv.reader(lines[start:]))
    hdr, units = rows[0], rows[1]
    ix = {h: i for i, h in enumerate(hdr)}
    print('%-4s %-58s' % ('id', 'kernel') + ''.join('%9s' % c for _, c, _ in COLS))
    for r in rows[2:]:
        if len(r) < len(hdr):
            continue
        vals = []
        for m, _, scale in COLS:
            if m == 'launch__cluster_dim_x' and m not in ix:
                m = next((h for h in hdr if h.startswith('launch__cluster')), m)
            v = num(r[ix[m]]) if m in ix else None
            u = units[ix[m]] if m in ix else ''
            if v is not None and m == 'gpu__time_duration.sum':
                v = v * (1e3 if u in ('us', 'usecond') else 1e6 if u in ('ms', 'msecond') else 1)  # to ns
            if v is not None and m.startswith(('dram__bytes', 'lts__t_bytes')):
                v = v * {'Kbyte': 1e3, 'Mbyte': 1e6, 'Gbyte': 1e9, 'KB': 1e3, 'MB': 1e6, 'GB': 1e9}.get(u, 1)
            if v is not None and m.endswith('per_second'):
                v = v * {'Ghz': 1e9, 'GHz': 1e9, 'Mhz': 1e6, 'MHz': 1e6, 'cycle/nsecond': 1e9,
                         'cycle/usecond': 1e6}.get(u, 1)
            vals.append('%9s' % ('-' if v is None else ('%.0f' % (v * scale) if scale == 1 and v > 100 else
                                                         '%.2f' % (v * scale))))
        print('%-4s %-58s' % (r[ix['ID']], r[ix['Kernel Name']][:58]) + ''.join(vals))


if __name__ == '__main__':
    main(sys.argv[1])
