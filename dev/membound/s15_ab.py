"""Session 15 A/B summary: s15_ab.py DIR A B TITLE -- per point A time / B time (steady and cold) over the rounds
DIR/{A,B}_{1,2,3}.json (camel bench membound --json), geomean, and the % of the 1 GiB copy before / after."""
import json, sys, math, collections
X = sys.argv[1]
def load(f):
    return {(r["op"], r["dtype"], "%dx%d" % (r["shape"]["rows"], r["shape"]["cols"])): r
            for r in json.load(open(f))["results"]}
def summ(a, b, title):
    rat = collections.defaultdict(list); frac = {}
    for r in (1, 2, 3):
        try: B, N = load(f"{X}/{a}_{r}.json"), load(f"{X}/{b}_{r}.json")
        except Exception as e: print("round", r, "missing:", e); continue
        for k in N:
            if k not in B: continue
            rat[k + ("steady",)].append(B[k]["ms"] / N[k]["ms"])
            rat[k + ("cold",)].append(B[k]["cold_ms"] / N[k]["cold_ms"])
            frac[k] = (B[k]["ratio"], N[k]["ratio"], N[k]["size_ratio"], N[k]["bytes"] / 2**20)
    print(title)
    for k in sorted(rat, key=lambda k: (k[0], k[3], frac[k[:3]][3])):
        g = math.exp(sum(map(math.log, rat[k])) / len(rat[k]))
        f = frac[k[:3]]
        extra = "  copy %5.1f -> %5.1f (size %5.1f)" % (100 * f[0], 100 * f[1], 100 * f[2]) if k[3] == "steady" else ""
        print("  %-18s %-5s %-12s %5.0f MiB %-6s %.3f  [%s]%s" % (k[:3] + (f[3], k[3], g, " ".join("%.3f" % v for v in rat[k]), extra)))
summ(sys.argv[2], sys.argv[3], "== " + sys.argv[4] + " (time ratio, geomean of rounds) ==")
