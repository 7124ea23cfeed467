#!/usr/bin/env python3
"""One-screen summary of a membound record: python3 record_summary.py membound_h100.json

Prints how many shapes moving >= 16 MiB reach 90% of the same-size copy and how many results reach PyTorch, then each
shape under the line (dev/s21_record.sh, dev/s32_verify_record.sh)."""
import json
import sys

rows = json.load(open(sys.argv[1]))['results']
big = [r for r in rows if r['bytes'] >= 16 * 2**20]
print('shapes >= 16 MiB: %d; >= 90%% of the same-size copy: %d; >= PyTorch: %d of %d' % (
    len(big), sum(r['size_ratio'] >= 0.9 for r in big), sum(r['ratio'] >= 1 for r in rows if r.get('ratio')), len(rows)))
for r in big:
    if r['size_ratio'] < 0.9:
        print('under: %s %s %dx%d %.1f%%' % (r['op'], r['dtype'], r['shape']['rows'], r['shape']['cols'],
                                           100 * r['size_ratio']))
