#!/usr/bin/env python3
"""Joins several `camel bench membound --json` runs of the same build into one: per (op, dtype, shape), the record of
the run whose steady % of the same-size copy (size_ratio, the issue's metric) is the median (with an even count, the
lower middle), whole (its times and its same-size copy together). Meta from the first run, plus how it was joined.
  python3 median_runs.py OUT.json RUN1.json RUN2.json RUN3.json"""
import json
import sys


def main(out, *runs):
    docs = [json.load(open(f)) for f in runs]
    by_key = {}
    for d in docs:
        for r in d['results']:
            k = (r['op'], r['dtype'], r['shape']['rows'], r['shape']['cols'], r.get('mode'))
            by_key.setdefault(k, []).append(r)
    order = [(r['op'], r['dtype'], r['shape']['rows'], r['shape']['cols'], r.get('mode')) for r in docs[0]['results']]
    results = []
    for k in order:
        rs = sorted(by_key[k], key=lambda r: r['size_ratio'])
        results.append(rs[(len(rs) - 1) // 2])
    meta = dict(docs[0]['meta'])
    meta['joined'] = ('per op / dtype / shape, the record of the run with the median steady size_ratio of %d runs of '
                      'camel bench membound in one job (dev/membound/median_runs.py)' % len(docs))
    json.dump({'meta': meta, 'results': results}, open(out, 'w'), indent=1)


if __name__ == '__main__':
    main(*sys.argv[1:])
