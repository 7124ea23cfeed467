"""Session 7 candidate 2 decision (run_s7h.sh): from a bwd_harness "perf" log with variants lib /
halves (each three times in turns), the best-of-3 medians per (S, causal) for the whole backward
(prep + main + convert) and the main kernel alone, their ratio halves / lib, and the verdict: WIN if
halves is >= 2% faster (bwd) on at least 2/3 of the points and every check is bitwise equal."""
import re
import sys

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
for key in sorted(best):
    d = best[key]
    if "lib" not in d or "halves" not in d:
        continue
    rb, rm = d["halves"][0] / d["lib"][0], d["halves"][1] / d["lib"][1]
    n += 1
    wins += rb <= 0.98
    print("S=%-5d %-6s lib bwd %.3f main %.3f | halves bwd %.3f main %.3f | ratio bwd %.3f main %.3f"
          % (key[0], key[1], d["lib"][0], d["lib"][1], d["halves"][0], d["halves"][1], rb, rm))
ok = n > 0 and not bad and 3 * wins >= 2 * n
print("DECISION: %s (%d of %d points >= 2%% faster%s)" % ("WIN" if ok else "NO", wins, n, ", a check DIFFERS" if bad else ""))
