#!/usr/bin/env python3
"""Session 13 (helper h13a; README "Session 13 (helper h13a)"): a model of the NARROW MC protocol (one K and one
V stage, clusters of two, attention_fwd_sm90.cuh): random interleavings of the two producers, the two consumers and
the asynchronous TMA deliveries; checks no deadlock, every delivery lands in the phase it was meant for, and no
stage is refilled while a consumer still reads it. Usage: python3 dev/attention_sm90/mc_sim.py (prints "all ok")."""
import random

class Bar:
    def __init__(self, count):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0
    def arrive(self, n=1, tx=0):
        self.pending -= n; self.tx += tx; assert self.pending >= 0; self._check()
    def complete_tx(self, b):
        self.tx -= b; self._check()
    def _check(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1; self.pending = self.count
    def done(self, ph):  # phase ph completed
        return self.phase > ph

def run(n, seed):
    rng = random.Random(seed)
    ns = min(n)
    cta = []
    for r in range(2):
        cta.append(dict(kf=Bar(1), vf=Bar(1), ke=Bar(2), ve=Bar(2), kread=None, vread=None, kfill=-1, vfill=-1))
    inflight = []  # (dst cta, which, step, bytes)
    # producer programs as generators of (wait_cond, action)
    def producer(r):
        c = cta[r]
        def load(which, j):
            bar = c['kf'] if which == 'k' else c['vf']
            assert bar.phase == j, (r, which, j, bar.phase)
            bar.arrive(1, 2)  # arrive.expect_tx: the tx announce and the arrival at once
            # (model: tx announced 2 halves; the arrival above already counted)
            if j < ns:
                for dst in (0, 1): inflight.append((dst, which, j, 1, r))
            else:
                inflight.append((r, which, j, 2, r))
        if n[r] == 0: return
        yield (lambda: True, lambda: load('k', 0))
        for j in range(n[r]):
            if j + 1 < n[r]:
                yield (lambda j=j: c['ke'].done(j), lambda j=j: load('k', j + 1))
            if j > 0:
                yield (lambda j=j: c['ve'].done(j - 1), lambda j=j: load('v', j))
            else:
                yield (lambda: True, lambda: load('v', 0))
    def consumer(r):
        c, p = cta[r], cta[r ^ 1]
        def rel(which, j):
            key = which + 'e'
            if j < ns: c[key].arrive(); p[key].arrive()
            else: c[key].arrive(2)
            c[which + 'read'] = None
        def read(which, j):
            c[which + 'read'] = j
        if n[r] == 0: return
        yield (lambda: c['kf'].done(0), lambda: read('k', 0))
        yield (lambda: True, lambda: rel('k', 0))
        for j in range(1, n[r]):
            yield (lambda j=j: c['kf'].done(j), lambda j=j: read('k', j))
            yield (lambda j=j: c['vf'].done(j - 1), lambda j=j: read('v', j - 1))
            yield (lambda: True, lambda j=j: rel('k', j))
            yield (lambda: True, lambda j=j: rel('v', j - 1))
        yield (lambda: c['vf'].done(n[r] - 1), lambda: read('v', n[r] - 1))
        yield (lambda: True, lambda: rel('v', n[r] - 1))
    progs = [producer(0), producer(1), consumer(0), consumer(1)]
    cur = [next(g, None) for g in progs]
    steps = 0
    while True:
        ready = [i for i, x in enumerate(cur) if x is not None and x[0]()]
        choices = [('p', i) for i in ready] + [('d', k) for k in range(len(inflight))]
        if not choices:
            if all(x is None for x in cur) and not inflight: return True
            print("DEADLOCK", n, seed, [i for i, x in enumerate(cur) if x is not None]); return False
        kind, i = rng.choice(choices)
        if kind == 'p':
            cur[i][1](); cur[i] = next(progs[i], None)
        else:
            dst, which, j, b, src = inflight.pop(i)
            c = cta[dst]
            bar = c['kf'] if which == 'k' else c['vf']
            # the delivery must land in phase j of the destination's full barrier, and the stage must not be read
            assert bar.phase == j, ("early/late delivery", n, seed, dst, which, j, bar.phase)
            assert c[which + 'read'] is None or c[which + 'read'] == j, ("overwrite while read", n, seed, dst, which, j)
            bar.complete_tx(b)
        steps += 1
        assert steps < 100000

ok = True
for n0 in range(0, 6):
    for n1 in range(0, 6):
        for seed in range(300):
            ok &= run((n0, n1), seed)
print("all ok" if ok else "FAILED")
