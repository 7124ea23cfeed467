#!/usr/bin/env python3
"""Table of ncu --csv --metrics runs (dev/membound/run_s17_diet.sh): python3 ncu_table.py A.csv [B.csv ...]

One line per profiled launch: kernel (mangled name shortened to name<template args>), grid x block, duration,
warp instructions, IPC, issue-slot use %, warps active %, DRAM % of peak, and the stall reasons (warps stalled per
issue) above 0.1, largest first."""
import csv
import re
import sys
from collections import OrderedDict


def short(name):
    m = re.match(r'_Z\d+(\w+?)I(.*)EEv', name)
    if not m:
        return name[:40]
    return '%s<%s>' % (m.group(1), ','.join(re.findall(r'L[ib](\d+)E', m.group(2) + 'E')))


def num(s):
    try:
        return float(s.replace(',', ''))
    except ValueError:
        return float('nan')


def table(path):
    lines = open(path, errors='replace').read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        print('%s: no ncu table' % path)
        return
    launches = OrderedDict()
    for row in csv.DictReader(lines[start:]):
        k = (row['ID'], row['Kernel Name'])
        launches.setdefault(k, {})[row['Metric Name']] = num(row['Metric Value'])
    print('== %s' % path)
    print('%-22s %7s %5s %9s %10s %5s %6s %6s %6s  stalls per issue' % (
        'kernel', 'grid', 'block', 'us', 'warp inst', 'IPC', 'issue%', 'warps%', 'dram%'))
    for (i, name), m in launches.items():
        stalls = sorted(((v, re.sub(r'smsp__average_warps_issue_stalled_(\w+)_per_issue_active.ratio', r'\1', k))
                         for k, v in m.items() if 'issue_stalled' in k and v > 0.1), reverse=True)
        print('%-22s %7d %5d %9.1f %10.3g %5.2f %6.1f %6.1f %6.1f  %s' % (
            short(name), m.get('launch__grid_size', 0), m.get('launch__block_size', 0),
            m.get('gpu__time_duration.sum', 0) / 1000.0, m.get('sm__inst_executed.sum', 0),
            m.get('sm__inst_executed.avg.per_cycle_active', 0),
            m.get('smsp__issue_active.avg.pct_of_peak_sustained_active', 0),
            m.get('sm__warps_active.avg.pct_of_peak_sustained_active', 0),
            m.get('dram__throughput.avg.pct_of_peak_sustained_elapsed', 0),
            ' '.join('%s %.2f' % (n, v) for v, n in stalls[:5])))


for p in sys.argv[1:]:
    table(p)
