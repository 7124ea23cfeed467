#!/usr/bin/env python3
"""One line per launch of an `ncu --csv --page raw` export with SpeedOfLight / LaunchStats / WarpStateStats: kernel,
grid, cluster, duration, DRAM read bytes, SM throughput, then the warp stall reasons (cycles a warp waits per issued
instruction, smsp__average_warps_issue_stalled_*_per_issue_active.ratio), largest first.
   python3 ncu_stalls_raw.py NCU.csv"""
import csv
import sys


def num(s):
    try:
        return float(s.replace(',', ''))
    except (ValueError, AttributeError):
        return None


def main(path):
    lines = open(path, errors='replace').read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        print('no ncu rows in', path)
        return
    rows = list(csv.reader(lines[start:]))
    hdr, units = rows[0], rows[1]
    ix = {h: i for i, h in enumerate(hdr)}
    stall = [h for h in hdr if h.startswith('smsp__average_warps_issue_stalled_') and
             h.endswith('_per_issue_active.ratio')]

    def get(r, m):
        return num(r[ix[m]]) if m in ix and ix[m] < len(r) else None

    for r in rows[2:]:
        if len(r) < len(hdr):
            continue
        dur = get(r, 'gpu__time_duration.sum')
        du = units[ix['gpu__time_duration.sum']] if 'gpu__time_duration.sum' in ix else ''
        us = dur * {'ns': 1e-3, 'nsecond': 1e-3, 'us': 1, 'usecond': 1, 'ms': 1e3, 'msecond': 1e3}.get(du, 1e-3) \
            if dur is not None else float('nan')
        cl = next((get(r, h) for h in hdr if h.startswith('launch__cluster_dim_x')), None)
        dram = get(r, 'dram__bytes_read.sum')
        dunit = units[ix['dram__bytes_read.sum']] if 'dram__bytes_read.sum' in ix else ''
        if dram is not None:
            dram *= {'Kbyte': 1e3, 'Mbyte': 1e6, 'Gbyte': 1e9, 'KB': 1e3, 'MB': 1e6, 'GB': 1e9}.get(dunit, 1)
        st = sorted(((get(r, h) or 0.0, h[len('smsp__average_warps_issue_stalled_'):-len('_per_issue_active.ratio')])
                     for h in stall), reverse=True)
        tot = sum(v for v, _ in st)
        print('%-4s %-52s grid %4s cl %s %8.2f us  DRAM rd %6.1f MB  sm %5s%%  stall/issue %.1f: %s' % (
            r[ix['ID']], r[ix['Kernel Name']][:52], r[ix['launch__grid_size']] if 'launch__grid_size' in ix else '-',
            '-' if cl is None else '%d' % cl, us, (dram or 0) / 1e6,
            r[ix['sm__throughput.avg.pct_of_peak_sustained_elapsed']][:5]
            if 'sm__throughput.avg.pct_of_peak_sustained_elapsed' in ix else '-', tot,
            ', '.join('%s %.2f' % (n, v) for v, n in st[:6])))


if __name__ == '__main__':
    main(sys.argv[1])
