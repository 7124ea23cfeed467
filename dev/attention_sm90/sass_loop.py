#!/usr/bin/env python3
"""Session 9 study (README "Plan (session 9 study): the causal forward order without C7511"): the consumer's
key loop of a persistent forward kernel in SASS, and how two builds' loops differ.

    cuobjdump -sass -fun KERNEL x.o > k.sass;  sass_loop.py base.sass [new.sass] [-v]

The key loop is the backward conditional branch that spans HGMMAs (in the D = 64 / 128 persistent kernel: the
j loop, 12 / 16 HGMMAs). Printed per file: the loop's range and instruction count, its HGMMA,
WARPGROUP.ARRIVE and WARPGROUP.DEPBAR counts (a loop whose wgmmas are serialized, ptxas C7511, has one
ARRIVE / DEPBAR pair per HGMMA instead of 2), and the same counts for the whole kernel. With two files:
the opcodes whose count differs in the loop, and (-v) the differing blocks, registers, immediates and
branch targets normalized (a pure scheduling / register renaming difference shows as a few moves)."""
import collections
import difflib
import re
import sys


def load(path):
    ins = []
    for line in open(path):
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            t = m.group(2).strip()
            n = re.sub(r"\bU?R\d+\b", "R", t)
            n = re.sub(r"\bU?P\d\b", "P", n)
            n = re.sub(r"0x[0-9a-f]+", "#", n)
            n = re.sub(r"(?<![\w.])-?\d+\b", "#", n)
            ins.append((int(m.group(1), 16), t, n))
    return ins


def opcode(x):
    t = x[2].split()
    return t[1] if t[0].startswith("@") else t[0]


def key_loop(ins):
    hg = [a for a, t, _ in ins if "HGMMA" in t]
    for i, (a, t, _) in enumerate(ins):
        m = re.match(r"@!?P\d\s+BRA\s+(0x[0-9a-f]+)", t)
        if m and int(m.group(1), 16) < a and any(int(m.group(1), 16) < h < a for h in hg):
            lo = int(m.group(1), 16)
            return [x for x in ins if lo <= x[0] <= a]
    return []


def counts(xs):
    c = collections.Counter(opcode(x) for x in xs)
    return {k: sum(v for o, v in c.items() if o.startswith(k)) for k in ("HGMMA", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR")}


def main():
    files = [a for a in sys.argv[1:] if a != "-v"]
    loops = []
    for f in files:
        ins = load(f)
        lp = key_loop(ins)
        loops.append(lp)
        rng = f"{lp[0][0]:x}..{lp[-1][0]:x}" if lp else "-"
        print(f"{f}: loop {rng} {len(lp)} instr {counts(lp)}; kernel {len(ins)} instr {counts(ins)}")
    if len(loops) == 2:
        a, b = loops
        ca, cb = collections.Counter(map(opcode, a)), collections.Counter(map(opcode, b))
        print("loop opcodes whose count differs:", {k: (ca[k], cb[k]) for k in sorted(set(ca) | set(cb)) if ca[k] != cb[k]})
        if "-v" in sys.argv:
            sm = difflib.SequenceMatcher(None, [x[2] for x in a], [x[2] for x in b], autojunk=False)
            for tag, i1, i2, j1, j2 in sm.get_opcodes():
                if tag != "equal":
                    print(f"== {tag}")
                    for x in a[i1:i2][:12]:
                        print(f"   - {x[0]:5x} {x[1]}")
                    for x in b[j1:j2][:12]:
                        print(f"   + {x[0]:5x} {x[1]}")


if __name__ == "__main__":
    main()
