"""Session 20: summary of camel bench gemm runs in turns (bench_<variant>_<round>.json under DIR): per case the
median of our ms per variant, each variant's speed over the first (base / variant: > 1 is faster), the ratio to
cuBLASLt, and GPT-2 / square geomeans. Usage: python3 s20_summary.py DIR BASE [VARIANT ...]"""
import glob, json, math, os, statistics as st, sys

d, names = sys.argv[1], sys.argv[2:]
runs, output_bad = {}, []
for f in sorted(glob.glob(os.path.join(d, 'bench_*_*.json'))):
    v = os.path.basename(f).split('_')[1]
    if v not in names:
        continue
    for r in json.load(open(f))['results']:
        s = r['shape']
        key = '%s %s %dx%dx%d %s%s %s' % (r['op'], r['name'], s['M'], s['N'], s['K'], s['op_a'], s['op_b'], r['dtype'])
        e = runs.setdefault(key, {}).setdefault(v, {'ms': [], 'ratio': [], 'path': r.get('path', '')})
        e['ms'].append(r['ours_ms'])
        e['ratio'].append(r['ratio'])
        if r.get('rel_diff') is not None and not r['rel_diff'] <= 2e-2:  # bf16's bound is far below (bg_diff_bound)
            output_bad.append((v, key, r.get('rel_diff')))
base = names[0]
print('%-43s %-24s %s' % ('case', 'path (' + base + ')', '  '.join('%8s' % n for n in names)) +
      '  ' + '  '.join('%s/%s' % (base, n) for n in names[1:]) + '   ratio to cuBLASLt per variant')
geo = {n: {} for n in names[1:]}
for key, e in runs.items():
    if not all(n in e for n in names):
        continue
    ms = {n: st.median(e[n]['ms']) for n in names}
    sp = {n: ms[base] / ms[n] for n in names[1:]}
    for n in names[1:]:
        geo[n].setdefault(('gpt2' if key.startswith('gpt2') else 'square') + ' ' + key.split()[-1], []).append(sp[n])
    print('%-43s %-24s %s  %s   %s' % (key, e[base]['path'][:24], '  '.join('%8.4f' % ms[n] for n in names),
                                      '  '.join('%*.3f' % (len(base) + len(n) + 1, sp[n]) for n in names[1:]),
                                      ' '.join('%.3f' % st.median(e[n]['ratio']) for n in names)))
for n in names[1:]:
    for k, xs in geo[n].items():
        if xs:
            print('%s/%s %s geomean %.4f (min %.3f, max %.3f, %d cases)' % (
                base, n, k, math.exp(sum(map(math.log, xs)) / len(xs)), min(xs), max(xs), len(xs)))
print('output checks not ok:', output_bad if output_bad else 'none')
