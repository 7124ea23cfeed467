#!/usr/bin/env python3
"""A replica of gemm_f32.cu's pick_plan (estimate_seconds, pick_tile with the same-size rule,
split K) on the 18 shapes of f32_check (squares + GPT-2), to see which picks move when
configurations' rates change (session 14, helper h14c).

    python3 dev/gemm_f32/pick_sim.py                          # the picks with today's rates
    python3 dev/gemm_f32/pick_sim.py M=1.05 L16:TN=1.03       # rates scaled: all layouts / one class
    python3 dev/gemm_f32/pick_sim.py --from /tmp/x/s14c.txt   # scaled by s14c's measured new/old

Layout classes as the rates: TN (0 operands contiguous along K), NN / TT (1), NT (2). With --from,
each configuration's rate of a class is scaled by the geometric mean of new/old over s14c's summary
rows that ran it in that class (V6 is never scaled: its loop did not change). Rates are from
F32_CONFIGS in src/kernels/cuda/gemm/gemm_f32.cu (read from the source when it is found)."""
import math
import os
import re
import sys

MAXY = 65535
SMS = 132
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../src/kernels/cuda/gemm/gemm_f32.cu")
SHORT = {"128x128x16/16x8": "L16", "128x128x16/8x8": "V6", "64x128x8/8x8": "M", "64x64x8/8x8": "S",
         "32x64x16/4x8": "T16"}


def configs():
    """[(name, bm, bn, threads, blocks_per_sm, [rate TN, NN, NT])], largest tiles first."""
    out = []
    try:
        pat = r"X\((\w+), (\d+), (\d+), (\d+), (\d+), (\d+), ([\d.]+), ([\d.]+), ([\d.]+)\)"
        for name, bm, bn, bk, tm, minb, r0, r1, r2 in re.findall(pat, open(SRC).read()):
            bm, bn, tm = int(bm), int(bn), int(tm)
            out.append([name, bm, bn, (bm // (4 * tm)) * (bn // 64) * 32, int(minb), [float(r0), float(r1), float(r2)]])
    except OSError:
        pass
    if not out:  # session 14's values
        out = [["L16", 128, 128, 128, 2, [45.6, 41.8, 41.3]], ["V6", 128, 128, 256, 2, [44.8, 46.6, 44.9]],
               ["M", 64, 128, 128, 3, [45.9, 40.3, 37.0]], ["S", 64, 64, 64, 6, [40.9, 38.0, 36.7]],
               ["T16", 32, 64, 64, 8, [36.2, 34.5, 30.8]]]
    return out


def warp_share(w):
    w = min(w, 8)
    return 0.56 * w / 4 if w <= 4 else 0.56 + 0.39 * (w - 4) / 4


def split_plan(K, want):
    if want <= 1:
        return 1, K
    per = -(-K // want)
    kc = -(-per // 16) * 16
    s = -(-K // kc)
    return (1, K) if s <= 1 else (s, kc)


def est(c, M, N, K, opa, opb, batch, splits, kc):
    name, bm, bn, th, bps, rate = c
    kcont = (opa == 'N') + (opb == 'T')
    blocks = (-(-M // bm)) * (-(-N // bn)) * batch * splits
    pw = SMS * bps
    tw = bm * bn
    full = math.floor(blocks / pw)
    left = blocks - full * pw
    r = rate[kcont]
    cost = full * bps * tw / r
    if left > 0:
        res = math.ceil(left / SMS)
        cost += res * tw / (r * warp_share(res * th / 32))
    s = cost * 2 * kc * SMS * 1e-12
    if splits > 1:
        s += 2 * splits * batch * M * (-(-N // 4) * 4) * 4 / 2.5e12 + 3e-6
    return s


def pick_tile(C, M, N, K, opa, opb, b, want):
    best, bc, bt = None, -1, None
    for c in C:
        if -(-M // c[1]) > MAXY:
            continue
        s, kc = split_plan(K, want)
        t = est(c, M, N, K, opa, opb, b, s, kc)
        if bc < 0:
            best, bc, bt = (c[0], s), t, c
            continue
        margin = 0.0 if c[1] * c[2] >= bt[1] * bt[2] else 0.08
        if t < bc * (1 - margin):
            best, bc, bt = (c[0], s), t, c
    return best, bc


def pick(C, M, N, K, opa, opb, b=1):
    un, uc = pick_tile(C, M, N, K, opa, opb, b, 1)
    best, bc = un, uc * 0.9
    for s in range(2, 17):
        if K // s < 512:
            break
        if s * b * M * (-(-N // 4) * 4) * 4 > 256 << 20:
            break
        for c in C:
            sp, kc = split_plan(K, s)
            if sp != s:
                continue
            t = est(c, M, N, K, opa, opb, b, sp, kc)
            if t < bc:
                best, bc = (c[0], sp), t
    return best


SHAPES = [("2048", 2048, 2048, 2048, 'N', 'N'), ("4096", 4096, 4096, 4096, 'N', 'N'),
          ("8192", 8192, 8192, 8192, 'N', 'N')]
for nm, (M, N, K) in [("qkv", (8192, 2304, 768)), ("proj", (8192, 768, 768)), ("fc", (8192, 3072, 768)),
                      ("mproj", (8192, 768, 3072)), ("lm", (8192, 50304, 768))]:
    SHAPES += [(nm + " fwd", M, N, K, 'N', 'T'), (nm + " dx", M, K, N, 'N', 'N'), (nm + " dw", N, K, M, 'T', 'N')]

CLASS = {"TN": 0, "NN": 1, "TT": 1, "NT": 2}


def scales_from(path):
    """{(config, class): geomean new/old} from s14c's summary rows."""
    acc = {}
    on = False
    for line in open(path):
        if line.startswith("== summary"):
            on = True
            continue
        m = re.match(r"(.{10}) (pick|forced)\s+(NN|NT|TN|TT) (\S+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if on and m and m.group(4) in ("L16", "M", "S", "T16"):
            acc.setdefault((m.group(4), CLASS[m.group(3)]), []).append(math.log(float(m.group(8))))
    return {k: math.exp(sum(v) / len(v)) for k, v in acc.items()}


def measured_rows(path):
    """{shape: [(plan text, new/cuBLAS)]} from s14c's summary rows."""
    out = {}
    on = False
    for line in open(path):
        if line.startswith("== summary"):
            on = True
            continue
        m = re.match(r"(.{10}) (pick|forced)\s+(NN|NT|TN|TT) (\S+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if on and m:
            plan = m.group(4) + ("/s" + m.group(5) if int(m.group(5)) > 1 else "")
            out.setdefault(m.group(1).strip(), []).append((plan, float(m.group(7))))
    return out


def main(argv):
    base = configs()
    scales = {}
    src = None
    if "--from" in argv:
        src = argv[argv.index("--from") + 1]
        scales.update(scales_from(src))
    for a in argv:
        m = re.match(r"(\w+)(?::(TN|NN|TT|NT))?=([\d.]+)$", a)
        if m:
            for k in ([CLASS[m.group(2)]] if m.group(2) else [0, 1, 2]):
                scales[(m.group(1), k)] = float(m.group(3))
    new = [[c[0], c[1], c[2], c[3], c[4], [c[5][k] * scales.get((c[0], k), 1.0) for k in range(3)]] for c in base]
    print("rates (TN, NN/TT, NT) TFLOP/s, today -> scaled:")
    for b, n in zip(base, new):
        print("  %-4s %s -> %s" % (b[0], " ".join("%5.1f" % r for r in b[5]), " ".join("%5.1f" % r for r in n[5])))
    moved = 0
    print("%-10s %-20s %-10s %-10s" % ("shape", "M x N x K op", "today", "scaled"))
    for nm, M, N, K, a, b in SHAPES:
        p0, p1 = pick(base, M, N, K, a, b), pick(new, M, N, K, a, b)
        f = lambda p: p[0] + ("/s%d" % p[1] if p[1] > 1 else "")
        mark = "  MOVES" if p0 != p1 else ""
        moved += p0 != p1
        print("%-10s %-20s %-10s %-10s%s" % (nm, "%dx%dx%d %s%s" % (M, N, K, a, b), f(p0), f(p1), mark))
        if p0 != p1 and src:
            print("           measured new / cuBLAS: " +
                  ", ".join("%s %.4f" % r for r in measured_rows(src).get(nm, [])))
    print("picks that move: %d of %d" % (moved, len(SHAPES)))


if __name__ == "__main__":
    main(sys.argv[1:])
