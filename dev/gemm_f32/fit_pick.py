#!/usr/bin/env python3
"""Fits pick_config's numbers (src/kernels/cuda/gemm/gemm_f32.cu) to a timing table of f32_check.

    python3 dev/gemm_f32/fit_pick.py f32_check.txt [--configs NAME,NAME,...]

f32_check times every tile configuration (forced) on the shapes of `camel bench gemm --set
square,gpt2,batched`. pick_config's estimate of a configuration's time is: full waves of tiles
(blocks_per_sm on every SM) at the configuration's rate for the layout (rate[0..2] by how many
operands are contiguous along K: TN 0, NN/TT 1, NT 2), then the last, partial wave at
warp_share(warps) of that rate, warps being what the busiest SM holds. This fits the three rates
of every configuration and the two warp_share numbers (share at 4 warps, share at 8) by
coordinate descent on the squared log error of predicted against measured time (all
configurations, all shapes), then prints them and, per shape, the configuration the fitted
estimate picks next to the measured best. Plain Python: no numpy or scipy needed.
"""
import math
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "kernels", "cuda", "gemm",
                   "gemm_f32.cu")
SMS = 132

# name in f32_check's table -> (a_t, b_t, M, N, K, batch)
SHAPES = {
    "2048": (0, 0, 2048, 2048, 2048, 1), "4096": (0, 0, 4096, 4096, 4096, 1), "8192": (0, 0, 8192, 8192, 8192, 1),
    "qkv fwd": (0, 1, 8192, 2304, 768, 1), "qkv dx": (0, 0, 8192, 768, 2304, 1), "qkv dw": (1, 0, 2304, 768, 8192, 1),
    "proj fwd": (0, 1, 8192, 768, 768, 1), "proj dx": (0, 0, 8192, 768, 768, 1), "proj dw": (1, 0, 768, 768, 8192, 1),
    "fc fwd": (0, 1, 8192, 3072, 768, 1), "fc dx": (0, 0, 8192, 768, 3072, 1), "fc dw": (1, 0, 3072, 768, 8192, 1),
    "mproj fwd": (0, 1, 8192, 768, 3072, 1), "mproj dx": (0, 0, 8192, 3072, 768, 1),
    "mproj dw": (1, 0, 768, 3072, 8192, 1), "lm fwd": (0, 1, 8192, 50304, 768, 1),
    "lm dx": (0, 0, 8192, 768, 50304, 1), "lm dw": (1, 0, 50304, 768, 8192, 1),
    "64x1024^3": (0, 0, 1024, 1024, 1024, 64), "8192x8192x1024": (0, 0, 8192, 8192, 1024, 1),
}


def configs_from_source():
    """name -> (bm, bn, threads, blocks_per_sm) from F32_CONFIGS."""
    out = {}
    pat = r"X\((\w+), (\d+), (\d+), (\d+), (\d+), (\d+), [\d.]+, [\d.]+, [\d.]+\)"
    for _, bm, bn, bk, tm, minb in re.findall(pat, open(SRC).read()):
        bm, bn, tm, minb = int(bm), int(bn), int(tm), int(minb)
        out["%dx%dx%s/%dx8" % (bm, bn, bk, tm)] = (bm, bn, (bm // (4 * tm)) * (bn // 64) * 32, minb)
    return out


def read_table(path):
    rows, names = [], None
    for line in open(path):
        if line.startswith("set "):
            names = line.split()[5:]
            continue
        m = re.match(r"(square|gpt2|batched)\s+(.+?)\s+(NN|NT|TN|TT)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+\S+\s+(.*)", line)
        if m and names:
            vals = m.group(5).split()
            rows.append((m.group(2).strip(), float(m.group(4)),
                         {names[i]: float(vals[2 * i]) for i in range(len(vals) // 2)}))
    return rows


def share(warps, s4, s8):
    w = min(warps, 8)
    return s4 * w / 4 if w <= 4 else s4 + (s8 - s4) * (w - 4) / 4


def predict(geom, shape, rates, s4, s8):
    """Seconds (up to one constant factor per shape, which does not change a pick)."""
    a_t, b_t, M, N, K, batch = SHAPES[shape]
    bm, bn, threads, bps = geom
    rate = rates[(not a_t) + b_t] * 1e12 / SMS
    tiles = math.ceil(M / bm) * math.ceil(N / bn) * batch
    full = tiles // (SMS * bps)
    left = tiles - full * SMS * bps
    work = 2.0 * bm * bn * K
    t = full * bps * work / rate
    if left:
        resident = math.ceil(left / SMS)
        t += resident * work / (rate * min(share(resident * threads / 32, s4, s8), 1.0))
    return t


def main():
    geoms = configs_from_source()
    rows = read_table(sys.argv[1])
    use = [c for c in rows[0][2] if c in geoms]
    if "--configs" in sys.argv:
        use = [c for c in use if c in sys.argv[sys.argv.index("--configs") + 1].split(",")]

    def unpack(x):
        return {c: x[3 * i:3 * i + 3] for i, c in enumerate(use)}, x[-2], x[-1]

    def loss(x):
        rates, s4, s8 = unpack(x)
        err = 0.0
        for shape, _, tf in rows:
            a_t, b_t, M, N, K, batch = SHAPES[shape]
            flop = 2.0 * M * N * K * batch
            for c in use:
                # a constant per-tile overhead would scale every configuration alike: fit it out
                err += math.log(predict(geoms[c], shape, rates[c], s4, s8) / (flop / (tf[c] * 1e12))) ** 2
        return err

    x = [45.0] * (3 * len(use)) + [0.6, 0.9]
    steps = [2.0] * (3 * len(use)) + [0.1, 0.1]
    f = loss(x)
    for _ in range(200):
        improved = False
        for i in range(len(x)):
            for sign in (1, -1):
                y = list(x)
                y[i] += sign * steps[i]
                fy = loss(y)
                if fy < f:
                    x, f, improved = y, fy, True
        if not improved:
            steps = [s / 2 for s in steps]
            if max(steps) < 1e-3:
                break
    rates, s4, s8 = unpack(x)
    print("rms log error %.3f; warp_share: %.2f at 4 warps, %.2f at 8" %
          (math.sqrt(f / (len(rows) * len(use))), s4, s8))
    for c in use:
        print("  %-18s rates TN %.1f  NN/TT %.1f  NT %.1f" % (c, *rates[c]))
    print("%-16s %-18s %6s   %-18s %6s" % ("shape", "fitted pick", "ratio", "measured best", "ratio"))
    for shape, ref, tf in rows:
        pred = {c: predict(geoms[c], shape, rates[c], s4, s8) for c in use}
        pick = min(pred, key=pred.get)
        best = max(use, key=lambda c: tf[c])
        print("%-16s %-18s %6.3f   %-18s %6.3f" % (shape, pick, tf[pick] / ref, best, tf[best] / ref))


if __name__ == "__main__":
    main()
