"""Harness decision (bwd_harness "perf" logs, variants in turns): the best-of-3 medians per (S, causal)
for the whole backward (prep + main + convert) and the main kernel alone, their ratio CAND / lib, and
the verdict.
  bwd_decide.py LOG [CAND]              session 7 (run_s7h.sh, CAND = halves): WIN if CAND is >= 2%
                                        faster (bwd) on at least 2/3 of the points;
  bwd_decide.py LOG CAND --noslower     session 8 (run_s8b.sh, CAND = fused): WIN if CAND's bwd is
                                        on average >= 1% faster and nowhere > 1% slower;
  --base NAME                           compare against variant NAME instead of lib (session 8 part
                                        2, run_s8c.sh: pdl against plain).
Either way every check in the log must be bitwise equal."""
import re
import sys

cand = sys.argv[2] if len(sys.argv) > 2 else "halves"
noslower = "--noslower" in sys.argv
base = sys.argv[sys.argv.index("--base") + 1] if "--base" in sys.argv else "lib"
best = {}
bad = False
for line in open(sys.argv[1]):
    if "DIFFERS" in line:
        bad = True
    m = re.match(r"D=(\d+) S=(\d+)\s+(causal|full)\s+(\w+)(?: \(\d\))?\s+\| bwd ([\d.]+) ms.*main ([\d.]+)", line)
    if m:
        key = (int(m.group(2)), m.group(3))
        v = best.setdefault(key, {}).setdefault(m.group(4), [1e9, 1e9])
        v[0], v[1] = min(v[0], float(m.group(5))), min(v[1], float(m.group(6)))
wins = n = 0
ratios = []
for key in sorted(best):
    d = best[key]
    if base not in d or cand not in d:
        continue
    rb, rm = d[cand][0] / d[base][0], d[cand][1] / d[base][1]
    n += 1
    wins += rb <= 0.98
    ratios.append(rb)
    print("S=%-5d %-6s %s bwd %.3f main %.3f | %s bwd %.3f main %.3f | ratio bwd %.3f main %.3f"
          % (key[0], key[1], base, d[base][0], d[base][1], cand, d[cand][0], d[cand][1], rb, rm))
if noslower:
    mean = sum(ratios) / len(ratios) if ratios else 9
    ok = n > 0 and not bad and mean <= 0.99 and max(ratios) <= 1.01
    print("DECISION: %s (%s / %s bwd: mean %.3f, max %.3f over %d points%s)"
          % ("WIN" if ok else "NO", cand, base, mean, max(ratios) if ratios else 9, n, ", a check DIFFERS" if bad else ""))
else:
    ok = n > 0 and not bad and 3 * wins >= 2 * n
    print("DECISION: %s (%d of %d points >= 2%% faster%s)" % ("WIN" if ok else "NO", wins, n,
                                                              ", a check DIFFERS" if bad else ""))
