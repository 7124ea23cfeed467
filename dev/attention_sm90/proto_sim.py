#!/usr/bin/env python3
"""Session 10 (helper h10b; README "Session 10 (helper h10b)"): a model of the synchronization of the persistent
forward with NC consumers (s10b_bm192.patch: the GEMM-turn rotation of named barriers, the per-consumer key-tile
counts and the pass loop, the K / V stage mbarriers, Q / tile_id through q_full / q_empty), written from the
patched kernel line by line, run over random interleavings of the producer and the consumers on random
sequences of one CTA's work tiles (awkward S, S_q != S_kv, causal and full, NC = 2 and 3, 2 and 4 stages).

    python3 dev/attention_sm90/proto_sim.py        # prints "ok N runs" or raises

Checks: no deadlock; a named barrier never completes on arrivals alone (a consumer two turns ahead); mbarrier
arrivals counted in the right phase (no K / V stage, no Q overwritten while a consumer reads it, every read sees
its own tile); every named barrier balanced at the end; every row's visible keys inside its consumer's key
tiles, and no consumer computing more key tiles than the 128-row kernel gave its rows. Mutations it catches (checked
once): the pass loop without turns (deadlock), v_empty before v_full in the pass loop (V overwritten while
read), it += n instead of the tile's count (deadlock)."""
import random, sys, math

class Dead(Exception): pass
class Err(Exception): pass

class MBar:
    def __init__(s, count): s.count, s.pend, s.phase = count, 0, 0
    def arrive(s, k=1):
        s.pend += k
        if s.pend > s.count: raise Err("mbar over-arrival")
        if s.pend == s.count: s.pend, s.phase = 0, s.phase + 1
    def done(s, parity): return (s.phase & 1) != parity

class NBar:  # hardware named barrier, 256 threads = 2 warpgroups
    def __init__(s): s.arrived, s.syncers, s.gen = 0, 0, 0
    def add(s, sync):
        s.arrived += 1
        if sync: s.syncers += 1
        if s.arrived == 2:
            if s.syncers == 0: raise Err("named barrier completed by arrivals only")
            s.arrived, s.syncers, s.gen = 0, 0, s.gen + 1
            return True
        return False

def run(tiles, NC, ST, seed):
    rnd = random.Random(seed)
    q_full, q_empty = MBar(1), MBar(4 * NC)
    k_full = [MBar(1) for _ in range(ST)]; v_full = [MBar(1) for _ in range(ST)]
    k_empty = [MBar(NC) for _ in range(ST)]; v_empty = [MBar(NC) for _ in range(ST)]
    bars = {i: NBar() for i in range(1, NC + 1)}
    st = {"tile_id": None, "kslot": [None] * ST, "vslot": [None] * ST, "q": None,
          "kread": [set() for _ in range(ST)], "vread": [set() for _ in range(ST)], "qread": set()}
    turns = [0] * NC

    def producer():
        it = 0
        for rq, t in enumerate(tiles):
            if rq > 0:
                while not q_empty.done((rq - 1) & 1): yield
            if st["qread"]: raise Err("Q refilled while read")
            st["tile_id"] = rq; st["q"] = rq
            q_full.arrive()
            for j in range(t["N"]):
                s, r = it % ST, it // ST
                if r > 0:
                    while not k_empty[s].done((r - 1) & 1): yield
                if st["kread"][s]: raise Err(f"K slot {s} overwritten while read")
                st["kslot"][s] = it; k_full[s].arrive(); yield
                if r > 0:
                    while not v_empty[s].done((r - 1) & 1): yield
                if st["vread"][s]: raise Err(f"V slot {s} overwritten while read")
                st["vslot"][s] = it; v_full[s].arrive(); yield
                it += 1
        rq = len(tiles)
        if rq > 0:
            while not q_empty.done((rq - 1) & 1): yield
        st["tile_id"] = -1; q_full.arrive()

    def bar_sync(c, i):
        gen = bars[i].gen
        if not bars[i].add(True):
            while bars[i].gen == gen: yield

    def consumer(c):
        nxt = (2 - c) if NC == 2 else (1 if c == NC - 1 else c + 2)
        if c == NC - 1: bars[1].add(False)
        it = 0; rq = 0
        while True:
            while not q_full.done(rq & 1): yield
            tid = st["tile_id"]
            if tid == -1: break
            t = tiles[tid]; n, N = t["n"][c], t["N"]
            if n == 0: q_empty.arrive(4)
            else: st["qread"].add(c)
            def qk(g, j):
                s = g % ST
                while not k_full[s].done((g // ST) & 1): yield
                yield from bar_sync(c, 1 + c); turns[c] += 1
                if st["kslot"][s] != g or st["q"] != tid: raise Err("QK reads the wrong tile")
                st["kread"][s].add(c)
            def pv(g):
                s = g % ST
                while not v_full[s].done((g // ST) & 1): yield
                if st["vslot"][s] != g: raise Err("PV reads the wrong tile")
                st["vread"][s].add(c)
            def qk_done(g, j):
                s = g % ST
                if st["kslot"][s] != g: raise Err("K overwritten during QK")
                st["kread"][s].discard(c); k_empty[s].arrive()
                if j == n - 1: st["qread"].discard(c); q_empty.arrive(4)
            def pv_done(g):
                s = g % ST
                if st["vslot"][s] != g: raise Err("V overwritten during PV")
                st["vread"][s].discard(c); v_empty[s].arrive()
            if n > 0:
                yield from qk(it, 0); bars[nxt].add(False); yield; qk_done(it, 0); yield
                for j in range(1, n):
                    g = it + j
                    yield from qk(g, j); yield from pv(g - 1); bars[nxt].add(False); yield
                    qk_done(g, j); yield; pv_done(g - 1); yield
                g = it + n - 1
                yield from pv(g); yield; pv_done(g)
            for j in range(n, N):
                g = it + j; s = g % ST
                while not k_full[s].done((g // ST) & 1): yield
                yield from bar_sync(c, 1 + c); turns[c] += 1
                bars[nxt].add(False); k_empty[s].arrive()
                while not v_full[s].done((g // ST) & 1): yield
                v_empty[s].arrive(); yield
            it += N; rq += 1
        if c == 0: yield from bar_sync(c, 1)

    agents = [producer()] + [consumer(c) for c in range(NC)]
    alive = list(range(len(agents)))
    stall = 0
    while alive:
        i = rnd.choice(alive)
        try:
            next(agents[i]); stall += 1
        except StopIteration:
            alive.remove(i); stall = 0
        if stall > 200000: raise Dead(f"deadlock, alive {alive}, turns {turns}")
    for i, b in bars.items():
        if b.arrived: raise Err(f"named barrier {i} left with {b.arrived} arrivals")
    return turns

def tiles_for(Sq, Sk, causal, NC, BN, picks):
    BM = 64 * NC; off = Sk - Sq; qt = -(-Sq // BM); out = []
    for tl in picks:
        q0 = tl * BM
        k_end = min(Sk, max(0, min(q0 + BM, Sq) + off)) if causal else Sk
        N = -(-k_end // BN); n = []
        for c in range(NC):
            if NC > 2:
                r0 = q0 + 64 * c; ke = Sk if r0 < Sq else 0
                if causal: ke = min(ke, max(0, min(r0 + 64, Sq) + off))
                nc = -(-ke // BN)
            else: nc = N
            # coverage: every row's visible keys lie in tiles < nc; tiles in [nc, N) are fully masked for its rows
            for row in range(q0 + 64 * c, min(q0 + 64 * c + 64, Sq)):
                vis = min(Sk, max(0, row + off + 1)) if causal else Sk
                if -(-vis // BN) > nc: raise Err(f"row {row} needs {-(-vis // BN)} tiles, consumer has {nc}")
                # base (128-row) kernel's count for this row's tile
                q0b = (row // 128) * 128
                kb = min(Sk, max(0, min(q0b + 128, Sq) + off)) if causal else Sk
                if nc > -(-kb // BN): raise Err(f"row {row}: {nc} tiles, more than the 128-row kernel's {-(-kb // BN)}")
            assert nc <= N
            n.append(nc)
        out.append({"N": N, "n": n})
    return out, qt

rnd = random.Random(1)
cases = 0
for Sq, Sk in [(77, 77), (300, 77), (77, 300), (1000, 1000), (1500, 1000), (1000, 1500), (4097, 4097), (2048, 2048), (777, 777), (129, 1025), (1, 1), (65, 67)]:
    for causal in (0, 1):
        for NC in (2, 3):
            BM = 64 * NC; qt = -(-Sq // BM)
            for trial in range(6):
                picks = [rnd.randrange(qt) for _ in range(rnd.randint(1, 6))]
                tiles, _ = tiles_for(Sq, Sk, causal, NC, 128, picks)
                for ST in (2, 4):
                    run(tiles, NC, ST, rnd.randrange(1 << 30)); cases += 1
print("ok", cases, "runs")
