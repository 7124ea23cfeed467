#!/usr/bin/env python3
"""Top SASS lines of an `ncu --page source --csv --print-source sass` export by warp-stall samples.
   python3 ncu_sass_stalls.py SRC.csv"""
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors='replace')))
h = next(i for i, r in enumerate(rows) if r and ('Source' in r or 'Address' in r))
hdr = rows[h]
ix = {k: i for i, k in enumerate(hdr)}
print(hdr[:12])
samp = next((k for k in hdr if k.startswith('Warp Stall Sampling (All')), None)
nsamp = next((k for k in hdr if k.startswith('Warp Stall Sampling (Not')), None)
data = []
for r in rows[h + 1:]:
    if len(r) < len(hdr): continue
    try: v = float(r[ix[samp]].replace(',', ''))
    except ValueError: continue
    data.append((v, r))
tot = sum(v for v, _ in data)
print('total samples', tot)
for v, r in sorted(data, key=lambda x: -x[0])[:30]:
    print('%6.2f%%  %s  %s' % (100 * v / tot, r[ix.get('Address', 0)], r[ix.get('Source', 1)][:110]))
