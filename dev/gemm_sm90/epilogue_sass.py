#!/usr/bin/env python3
"""The TMA epilogue's executed length in every gemm_sm90_kernel of a cuobjdump -sass listing
(dev/gemm_sm90/README.md, "Session 10 (helper h10c)"): SASS instructions one consumer warp runs from
the epilogue's first load (alpha's a_scale_mode, `LD.E [..+0x18]`) to its last stmatrix round's
closing barrier (other warps) or last TMA store's UTMACMDFLUSH (the leader warp), on the path that
the branch predicates take for D bf16 / f16, no bias, no activation, no tensor scales, and
alpha == 1 (bf1) or != 1 (bfs, f16). Predicates are evaluated from the compares that set them
(flags and pointers compared with RZ are zero; `..., 0x2` is D's dtype == bf16; FSETP `..., 1` is
s == 1; P2R-saved predicates followed). --old: the pre-session-10 epilogue (its per-quad scale_only
branch is never taken to the bias path; no dispatch).
    cuobjdump -sass x.o > x.sass; python3 dev/gemm_sm90/epilogue_sass.py [--old] x.sass"""
import collections, re, sys

SETP = re.compile(r'(?:@(!?)(P\d) )?([FI]SETP)\.(NE|EQ|NEU)(?:\.U32)?\.(AND|OR)(\.EX)? (P\d), PT, (R\d+)(?:\.reuse)?, '
                  r'(RZ|0x[0-9a-f]+|1), (!?)(P\d|PT)')
BRA = re.compile(r'(@(!?)(P\d) )?BRA(?:\.U)?(?:\.ANY)? (?:(!?)(P\d), )?(0x[0-9a-f]+)')


def funcs(path):
    cur, out = None, collections.OrderedDict()
    for line in open(path):
        m = re.search(r'Function : (\S+)', line)
        if m:
            cur = m.group(1)
            out[cur] = []
            continue
        m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
        if m and cur: out[cur].append((int(m.group(1), 16), m.group(2).strip()))
    return out


def name(f):
    bn, st, kind, ta, tb, cl, pp = re.search(r'ILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E', f).groups()
    op = {('0', '0'): 'NT', ('0', '1'): 'NN', ('1', '1'): 'TN', ('1', '0'): 'TT'}[(ta, tb)]
    kd = ['bf16', 'f16', 'tf32', 'e4m3', 'e5m2'][int(kind)]
    return f"<{bn},{st},{kd},{op},c{cl}{',pp' if pp == '1' else ''}>", int(bn)


def walk(body, leader, nst, mode, old):
    idx = {a: i for i, (a, _) in enumerate(body)}
    i = [i for i, (a, t) in enumerate(body) if re.match(r'LD\.E R\d+, desc\[UR\d+\]\[R\d+\.64\+0x18\]', t)][0]
    P, RF, n, stsm, lp = {'PT': True}, {}, 0, 0, None

    def pv(neg, p):
        if P.get(p) is None: raise ValueError('predicate %s unknown' % p)
        return not P[p] if neg == '!' else P[p]

    for _ in range(5000):
        a, t = body[i]
        n += 1
        stsm += 'STSM' in t
        if stsm == nst and (('UTMACMDFLUSH' in t) if leader else
                            ('BAR.SYNC' in t and any('FENCE' in x for _, x in body[i - 4:i]))):
            return n
        m = re.match(r'P2R (R\d+), PR, RZ, (0x[0-9a-f]+)', t)
        if m: RF[m.group(1)] = any(P.get('P%d' % b) for b in range(7) if int(m.group(2), 16) >> b & 1)
        m = SETP.match(t)
        if m:
            gneg, gp, kind, cmp, comb, ex, dst, reg, imm, cneg, cp = m.groups()
            if gp is None or pv(gneg, gp):
                if imm == 'RZ': v = RF.get(reg, False) if cmp == 'NE' else not RF.get(reg, False)
                elif imm == '0x2': v = (mode != 'f16') == (cmp == 'EQ')
                elif imm == '1' and kind == 'FSETP': v = (mode == 'bf1') == (cmp == 'EQ')
                elif imm == '0x1': v = cmp == 'NE'
                else: v = None
                P[dst] = None if v is None else (v and pv(cneg, cp)) if comb == 'AND' else (v or pv(cneg, cp))
        if re.match(r'(@!?P\d+ )?BRX', t): raise ValueError('jump table')
        m = BRA.match(t)
        if m:
            tgt = int(m.group(6), 16)
            if not m.group(1):
                i = idx[tgt]
                continue
            p = m.group(3)
            if 'BRA.U.ANY' in t: take = False
            elif body[i + 1][1].startswith('DEPBAR') and tgt == body[i + 2][0]:
                lp, take = p, not leader  # the leader's wait for its earlier stores
            elif p == lp and any('FENCE' in x for _, x in body[i - 5:i]): take = not leader  # the TMA stores
            elif old: take = False  # the per-quad scale_only branch to the bias/activation code
            else:
                take = pv(m.group(2), p) and (not m.group(5) or pv(m.group(4), m.group(5)))
            if take:
                i = idx[tgt]
                continue
        i += 1
    raise ValueError('no end found')


def main():
    old = '--old' in sys.argv
    for path in [a for a in sys.argv[1:] if not a.startswith('--')]:
        print('==', path, '(old epilogue)' if old else '')
        rows = collections.OrderedDict()
        for k, body in funcs(path).items():
            if 'gemm_sm90_kernel' not in k: continue
            nm, bn = name(k)
            r = []
            for mode in (['bf1'] if old else ['bf1', 'bfs', 'f16']):
                for leader in (False, True):
                    try: r.append(str(walk(body, leader, bn // 16, mode, old)))
                    except (ValueError, IndexError, KeyError) as e: r.append('?')
            rows.setdefault(tuple(r), []).append(nm)
        head = 'other / leader' if old else 'bf16 s=1 other / leader | bf16 s!=1 | f16'
        print(head)
        for r, names in rows.items():
            cols = ' / '.join(r[:2]) if old else ' | '.join(' / '.join(r[j:j + 2]) for j in (0, 2, 4))
            print('%-32s %3d kernels: %s' % (cols, len(names), ' '.join(names)))


main()
