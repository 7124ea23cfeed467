#!/usr/bin/env python3
"""Per profiled launch of an `ncu --csv --page raw` export with gpu__time_duration.sum, sm__cycles_active.max / .avg
and gpc__cycles_elapsed.avg.per_second: the kernel's duration, its busiest SM's active time (cycles / clock) and the
difference -- the part of ncu's duration outside any CTA (launch, the end's flush). Then the medians per kernel name.
   python3 ncu_gap.py NCU.csv"""
import csv
import statistics
import sys


def num(s):
    try:
        return float(s.replace(',', ''))
    except ValueError:
        return None


lines = open(sys.argv[1], errors='replace').read().splitlines()
start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
if start is None:
    sys.exit('no ncu rows')
rows = list(csv.DictReader(lines[start:]))
units = rows[0]
per = {}
print('%-4s %-60s %8s %9s %9s %7s' % ('id', 'kernel', 'us', 'activeMax', 'activeAvg', 'outside'))
for r in rows[1:]:
    dur = num(r['gpu__time_duration.sum'])
    if dur is None:
        continue
    u = units['gpu__time_duration.sum']
    dur *= 1e-3 if u.startswith('n') else 1e3 if u.startswith('m') else 1.0  # to us
    clk = num(r['gpc__cycles_elapsed.avg.per_second'])
    if units['gpc__cycles_elapsed.avg.per_second'] == 'cycle/nsecond':
        clk *= 1e9
    elif units['gpc__cycles_elapsed.avg.per_second'] == 'cycle/usecond':
        clk *= 1e6
    amax = num(r['sm__cycles_active.max']) / clk * 1e6
    aavg = num(r['sm__cycles_active.avg']) / clk * 1e6
    name = r['Kernel Name'][:60]
    print('%-4s %-60s %8.2f %9.2f %9.2f %7.2f' % (r['ID'], name, dur, amax, aavg, dur - amax))
    per.setdefault(name, []).append((dur, amax, dur - amax))
print('\nmedians: kernel, launches, us, busiest SM active us, outside us')
for k, v in per.items():
    print('  %-60s %3d %8.2f %8.2f %6.2f' % (k, len(v), *(statistics.median(x[i] for x in v) for i in range(3))))
