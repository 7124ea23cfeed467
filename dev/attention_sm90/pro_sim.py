#!/usr/bin/env python3
"""Session 13 (helper h13d): an event model of ONE CTA of the D = 256 one-tile forward kernel (128 query rows, two
consumers, BN 80, two K / V stages, INTRA + PINGPONG), to estimate what the PRO prologue (Q in per-consumer halves,
another TMA order) can save per CTA. Not a measurement: a model with assumed rates.

    pro_sim.py            (prints a table: CTA time base / PRO orders for n = 2, 4, 5, 7 key steps, several R, L)

Model: the SM's TMA intake is one in-order pipe: a request of b KB issued at t starts at max(t + L, end of the
previous one) and takes b / R us (L the memory latency, R the SM's intake rate in KB/us). The tensor core runs
wgmma groups one at a time in issue order: S (64 x 80 x 256) and P V (64 x 256 x 80) 0.48 us each (5.5 TFLOP/s an
SM: the kernel's steady 730 TFLOP/s over 132 SMs). A consumer's step j >= 1: wait K_j, its GEMM turn (ping-pong:
consumer 0 first), issue S_j, wait V_{j-1}, issue P_{j-1} V_{j-1}, pass the turn, wait S_j, release K_j, softmax
(SM us), wait P V, release V_{j-1}. Step 0: S_0 only; after the last step the last P V alone; consumer 1's epilogue
(EP us) ends the CTA. The producer issues the first two stages (and Q) at t = 0 in the given order, then K_j after
both consumers released K_{j-2}, V_j after both released V_{j-2}."""
import itertools

MMA, SM, EP = 0.48, 0.30, 0.4
KV, QH = 40.0, 32.0  # KB: one K or V tile of 80 keys x 256 x 2 bytes; a 64-row Q half


def cta(n, order, R, L, split_q):
    """CTA time (us) for n key steps. order: the first loads, names among Q, Q0, Q1, K0, V0, K1, V1."""
    pipe_end = [0.0]
    land = {}

    def req(name, kb, t):
        s = max(t + L, pipe_end[0])
        pipe_end[0] = s + kb / R
        land[name] = pipe_end[0]

    for nm in order:
        if nm == "Q":
            req("Q", 2 * QH, 0.0)
        elif nm.startswith("Q"):
            req(nm, QH, 0.0)
        elif int(nm[1]) < n:
            req(nm, KV, 0.0)
    if not split_q:
        land["Q0"] = land["Q1"] = land["Q"]
    tc = [0.0]  # tensor core free at

    def gemm(t_issue):
        s = max(t_issue, tc[0])
        tc[0] = s + MMA
        return tc[0]

    # event-driven in lockstep by step: consumers alternate issues (ping-pong)
    t = [0.0, 0.0]  # each consumer's clock
    turn = 0.0      # time the previous issuer passed the turn
    rel_k = {}      # (j, c) -> time K_j released by c
    rel_v = {}
    s_done = [0.0, 0.0]
    pv_done = [0.0, 0.0]
    for j in range(n + 1):
        for c in (0, 1):
            if j == 0:
                ti = max(t[c], land[f"Q{c}"], land["K0"], turn)
                turn = ti
                s_done[c] = gemm(ti)
                rel_k[(0, c)] = s_done[c]
                t[c] = s_done[c] + SM
            elif j < n:
                # K_j: loaded at t = 0 (j < 2) or after both released K_{j-2} (and V_j after V_{j-2})
                if f"K{j}" not in land:
                    kr = max(rel_k[(j - 2, 0)], rel_k[(j - 2, 1)])
                    req(f"K{j}", KV, kr)
                    vr = max(rel_v[(j - 2, 0)], rel_v[(j - 2, 1)])
                    req(f"V{j}", KV, max(vr, kr))
                ti = max(t[c], land[f"K{j}"], turn)
                s_end = gemm(ti)
                tp = max(ti, land[f"V{j - 1}"])
                pv_end = gemm(tp)
                turn = tp
                rel_k[(j, c)] = s_end
                t[c] = max(s_end + SM, pv_end)
                rel_v[(j - 1, c)] = pv_end
                t[c] += 0.05  # rescale + to_p
            else:
                ti = max(t[c], land[f"V{n - 1}"])
                pv_end = gemm(ti)
                rel_v[(n - 1, c)] = pv_end
                t[c] = pv_end
    return max(t[0], t[1] + EP)


ORDERS = {
    "base Q K0 V0 K1 V1": (["Q", "K0", "V0", "K1", "V1"], False),
    "Q0 K0 Q1 V0 K1 V1 (the brief's)": (["Q0", "K0", "Q1", "V0", "K1", "V1"], True),
    "Q K0 K1 V0 V1 (no Q split)": (["Q", "K0", "K1", "V0", "V1"], False),
    "Q0 K0 Q1 K1 V0 V1 (built)": (["Q0", "K0", "Q1", "K1", "V0", "V1"], True),
}
if __name__ == "__main__":
    print("CTA time in us (launch / init not included); mean over the S = 512 causal tile mix 2 / 4 / 5 / 7 steps; "
          "PRO saving per CTA and x 7.76 CTAs an SM")
    for L, R in itertools.product((0.8, 1.5), (40, 60, 90, 120, 180)):
        res = {}
        for name, (o, sq) in ORDERS.items():
            res[name] = [cta(n, o, R, L, sq) for n in (2, 4, 5, 7)]
        b = sum(res["base Q K0 V0 K1 V1"]) / 4
        line = f"L {L:3.1f} R {R:3d}: base {b:5.2f} ({' '.join(f'{v:5.2f}' for v in res['base Q K0 V0 K1 V1'])})"
        for name in list(ORDERS)[1:]:
            m = sum(res[name]) / 4
            line += f" | {name}: -{b - m:4.2f} us/CTA ({(b - m) * 7.76:4.1f} us/SM)"
        print(line)
