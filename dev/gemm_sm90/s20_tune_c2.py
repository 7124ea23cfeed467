"""Session 20: from camel tune gemm --json runs of several builds (DIR/tune_<build>.json), per shape the three
fastest cluster-1 tiles of the first build and, for each, time at cluster 2 / time at cluster 1 in every build
(cluster 1 is the same code in all of them: the in-process control). Usage: python3 s20_tune_c2.py DIR BUILD..."""
import json, sys

d, names = sys.argv[1], sys.argv[2:]
res = {}
for n in names:
    for r in json.load(open('%s/tune_%s.json' % (d, n)))['results']:
        s = r['shape']
        key = '%-8s %-9s %5dx%5dx%5d %s%s' % (r['op'], r['name'], s['M'], s['N'], s['K'], s['op_a'], s['op_b'])
        by = {}
        for rows, bn, sp, cl, g, ms in (x for x in r.get('quick', []) if x[5] is not None):
            by[(rows, bn, sp, cl)] = min(by.get((rows, bn, sp, cl), 1e9), ms)  # best over group_m
        res.setdefault(key, {})[n] = by
print('per shape: the three fastest cluster-1 tiles (rows x width x splits, ms in %s), then c2 / c1 in %s' %
      (names[0], ' / '.join(names)))
for key, d in res.items():
    c1 = sorted((v, k) for k, v in d[names[0]].items() if k[3] == 1)[:3]
    parts = []
    for ms, k in c1:
        k2 = k[:3] + (2,)
        rs = ['%.3f' % (d[n][k2] / d[n][k]) if n in d and k2 in d[n] and k in d[n] else '-' for n in names]
        parts.append('%dx%dx%d %.4f: %s' % (k[0], k[1], k[2], ms, '/'.join(rs)))
    print(key, ' | '.join(parts))
