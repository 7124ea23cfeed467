#!/usr/bin/env python3
"""Session 10 (helper h10d; README "Plan (session 10 study, helper h10d)"): a timing model of the D = 256
causal backward's ordered dQ adds, to rank designs before any device time. NOT a measurement.

Model (one dQ buffer per consumer; both consumers behave alike, so one is modelled): persistent CTAs claim
work tiles (kv head g, key block n) from a counter in the library's causal order (head-major, n descending).
A tile's step k is query tile m = n + k (BN = BM = 64, S_q = S_kv). Per step, cycles:
  consumer: compute Tc (x jitter), then the dQ store (s) once the buffer is free;
  writer w = partial index & 1 (two writers per buffer, DQ2W): starts at max(store done, w free),
    waits for the semaphore (rank m - n; block n + 1's release of tile m + poll latency), issues the
    bulk add; the buffer is free after the bulk read (R); the add completes after A more; the release
    (red.release) lands after Rl; w is free then. Rank 0 stores (no wait).
  a tile's first step starts after the previous tile's last store + the K / V load (KV); the next tile is
  claimed when the producer issued the last step (the start of the last step).
Variants: base (the library), unord (no order: UNORDERED), 1 writer (before DQ2W), poll/2 (the release
seen sooner), pair (the plan's candidate A: a 2-CTA cluster runs key blocks 2p + 1, 2p of a head in
lockstep on the same query tile, one ordered 16 KB add per consumer, pair and tile; x cycles of lockstep
cost a step; block 2p + 1 idle on tile 2p). Not modelled: L2 bandwidth (the pair halves the dQ bytes).

    python3 dev/attention_sm90/dq_chain_sim.py [S=8192]      # ~1 min; prints time per variant / base
"""
import heapq, random, sys

P = 132           # CTAs (H100 SMs)
T_C = 5700        # consumer cycles per step, the dQ store excluded (step ~6100 at 8k causal: 3.49 ms / 1000 steps)
S_ST = 400        # dQ store into the buffer (profile: 240-470)
R = 1600          # bulk add issue + read (profile: 1580-1677)
A = 600           # add completion after the read
RL = 300          # fence + red.release until the semaphore holds it (A + RL: profile 880)
POLL = 700        # ld.acquire round trip + nanosleep: when the next writer sees the release
KV = 2500         # K, V load at a tile's start (64 KB)
JIT = 0.06        # step time jitter (uniform +-)


def run(S, variant, seed=1, heads=16, x=0, poll=POLL, nw=2):
    rnd = random.Random(seed)
    nb = S // 64
    pair = variant == 'pair'
    # work tiles in claim order; pair: units of two key blocks (2p + 1, 2p) of a head
    tiles = []
    for g in range(heads):
        if pair:
            for p_ in range(nb // 2 - 1, -1, -1): tiles.append((g, p_))
        else:
            for n in range(nb - 1, -1, -1): tiles.append((g, n))
    cta_count = P // 2 if pair else P
    rel = {}            # (g, unit, m) -> release time
    waiting = {}        # (g, unit, m) -> list of CTA states parked on it
    nxt = [0]
    # CTA state: dict
    heap = []
    states = []
    for c in range(cta_count):
        st = {'id': c, 't': 0.0, 'free': 0.0, 'w': [0.0, 0.0], 'pi': 0, 'tile': None, 'k': 0, 'end': 0.0}
        states.append(st)
        heapq.heappush(heap, (0.0, c))
    finish = 0.0

    def claim(st, t):
        if nxt[0] >= len(tiles): return False
        st['tile'] = tiles[nxt[0]]; nxt[0] += 1
        st['k'] = 0
        st['t'] = max(t, st['end']) + KV
        return True

    for st in states: claim(st, 0.0)
    busy_steps = 0
    while heap:
        t, c = heapq.heappop(heap)
        st = states[c]
        if st['tile'] is None: continue
        g, u = st['tile']
        n0 = 2 * u if pair else u
        k = st['k']
        m = n0 + k
        last = m == nb - 1
        tc = T_C * (1 + JIT * (2 * rnd.random() - 1))
        if pair:
            tc = max(tc, T_C * (1 + JIT * (2 * rnd.random() - 1))) + x  # lockstep: the slower of two, + the DSMEM sum
        rank = m - n0 if not pair else m // 2 - u  # units above this one that see tile m
        # order dependency
        dep = None
        if variant != 'unord' and rank > 0:
            key = (g, u + 1, m)
            if key not in rel:
                waiting.setdefault(key, []).append(c)
                continue  # parked; resumed when the release is known
            dep = rel[key] + poll
        e = st['t'] + tc
        stt = max(e, st['free'])
        d = stt + S_ST
        w = st['pi'] % nw  # nw = 1: one writer per buffer (before DQ2W)
        b = max(d, st['w'][w])
        issue = b if dep is None else max(b, dep)
        st['free'] = issue + R
        done = st['free'] + (0 if variant == 'unord' else A + RL)
        st['w'][w] = done
        st['pi'] += 1
        rel[(g, u, m)] = done
        for cc in waiting.pop((g, u, m), []):
            heapq.heappush(heap, (states[cc]['t'], cc))
        busy_steps += 1
        if last:
            st['end'] = d
            finish = max(finish, done)
            if not claim(st, st['t']):
                st['tile'] = None
                continue
        else:
            st['k'] += 1
            st['t'] = d
        heapq.heappush(heap, (st['t'], c))
    assert not waiting, "deadlock in model"
    return finish


def main():
    global R, A, S_ST
    S = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    heads = (16384 // S) * 8  # B H at B S = 16k tokens, H = 8
    # two latency regimes: the session-8 profile's (D = 128 full 2k: R 1600, done + release 880) and one
    # calibrated so that one writer per buffer costs what DQ2W gained (3-6%): R 2500, A 3700
    for R_, A_ in ((1600, 600), (2500, 3700)):
        R, A, S_ST = R_, A_, 400
        base = sum(run(S, 'base', s, heads) for s in range(3))
        out = []
        for name, v, kw in (('unord', 'unord', {}), ('1 writer', 'base', {'nw': 1}), ('poll/2', 'base', {'poll': POLL // 2})):
            out.append((name, sum(run(S, v, s, heads, **kw) for s in range(3)) / base))
        # the pair: 16 KB adds (R / 2, store / 2), x = lockstep cost a step
        R, S_ST = R_ // 2, 200
        for x in (0, 150, 300):
            out.append(('pair x=%d' % x, sum(run(S, 'pair', s, heads, x=x) for s in range(3)) / base))
        print(f"S={S:5d} R={R_} A={A_}: base {base / 3 / 1.755e6:.3f} ms (1.755 GHz); / base: " +
              ", ".join(f"{n} {r:.3f}" for n, r in out))


if __name__ == '__main__':
    main()
