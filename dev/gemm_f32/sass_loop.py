#!/usr/bin/env python3
"""Static SASS statistics of the exact-f32 GEMM main loops (session 14, helper h14b).

    cuobjdump -sass gemm_f32.o > k.sass
    python3 dev/gemm_f32/sass_loop.py k.sass [--match 128ELi128ELi16ELi8E] [--dump | --brief]

For every function whose mangled name contains --match: the main loop = the backward branch
whose [target, branch] range holds the most FFMA. Counts in that range (static: every
instruction once, edge paths included): FFMA, LDS (by width), LDG, STS, LDL/STL, BAR,
BRA, integer/address (IADD3, IMAD, LEA, SHF, LOP3, ISETP, SEL, MOV...), other.
Register banks: an FFMA source is served by the operand reuse cache when the previous
instruction set .reuse on the same slot for the same register; the other register sources
are read from the banks. "pair2" = FFMAs with two bank reads in the same bank of 2
(reg % 2, the README's run-3 measure), "pair4" = the same with 4 banks (reg % 4), "triple2"
= three bank reads all in one bank of 2; "port cycles" = per FFMA the most reads that one of
the 2 banks serves (at least 1): a sub-core's bank has one read port (Huerta et al., MICRO
2025, on Ampere: two same-bank sources of an FMUL cost a bubble, three of an FFMA two), so
an FFMA stream issues at most 1 / (port cycles a FFMA) FFMA a cycle.
"""
import re
import sys
from collections import Counter

INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def functions(path):
    name, body = None, []
    for line in open(path):
        if "Function :" in line:
            if name:
                yield name, body
            name, body = line.split("Function :")[1].strip(), []
            continue
        m = INSN.search(line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(2)))
    if name:
        yield name, body


def opcode(text):
    t = re.sub(r"^@!?U?P[T0-9]+\s+", "", text)
    return t.split()[0] if t else ""


def branch_target(text):
    m = re.search(r"BRA\s+(?:!?U?P\d\s*,\s*)?(0x[0-9a-f]+)", text)
    return int(m.group(1), 16) if m else None


def regs_of(operand):
    m = re.match(r"^-?\|?(R\d+)(\.reuse)?", operand.strip())
    return (m.group(1), bool(m.group(2))) if m else (None, False)


def classify(op):
    base = op.split(".")[0]
    if base == "FFMA":
        return "FFMA"
    if base == "LDS":
        return "LDS" + (".128" if ".128" in op else ".64" if ".64" in op else ".32")
    if base in ("LDG", "STS", "LDL", "STL", "BAR", "BRA", "LDGSTS", "BSSY", "BSYNC"):
        return base
    if base in ("IADD3", "IMAD", "LEA", "SHF", "LOP3", "ISETP", "SEL", "MOV", "IABS", "IMNMX", "VIMNMX",
                "UIADD3", "UMOV", "ULDC", "LDC", "S2R", "S2UR", "USHF", "ULEA", "UISETP", "USEL", "R2UR",
                "PLOP3", "P2R", "R2P", "ISCADD", "IADD", "SHL", "SHR", "PRMT", "ULOP3", "UIMAD", "CS2R"):
        return "int/addr"
    if base == "NOP":
        return "NOP"
    return "other:" + base


def loop_of(body):
    best = None
    for i, (addr, text) in enumerate(body):
        if opcode(text).startswith("BRA"):
            t = branch_target(text)
            if t is not None and t < addr:
                rng = [x for x in body if t <= x[0] <= addr]
                n = sum(1 for x in rng if opcode(x[1]) == "FFMA")
                if best is None or n > best[0]:
                    best = (n, t, addr, rng)
    return best


def banks(rng):
    prev_reuse = {}
    stats = Counter()
    for addr, text in rng:
        op = opcode(text)
        t = re.sub(r"^@!?U?P[T0-9]+\s+", "", text)
        parts = t[len(op):].split(",")
        cur_reuse = {}
        if op == "FFMA":
            srcs = parts[1:4]
            reads = []
            for slot, s in enumerate(srcs):
                r, reuse = regs_of(s)
                if r is None or r == "RZ":
                    continue
                if reuse:
                    cur_reuse[slot] = r
                if prev_reuse.get(slot) == r:
                    stats["reuse_hits"] += 1
                    continue
                reads.append(int(r[1:]))
            stats["ffma"] += 1
            stats["bank_reads"] += len(reads)
            b2 = Counter(r % 2 for r in reads)
            stats["bank0"] += b2[0]
            stats["bank1"] += b2[1]
            stats["port_cycles"] += max(1, max(b2.values()) if b2 else 1)
            b4 = Counter(r % 4 for r in reads)
            if any(v >= 2 for v in b2.values()):
                stats["pair2"] += 1
            if any(v >= 2 for v in b4.values()):
                stats["pair4"] += 1
            if any(v >= 3 for v in b2.values()):
                stats["triple2"] += 1
        else:
            # any non-FFMA instruction: keep the cache only for slots it reuses (conservative: clear)
            for slot, s in enumerate(parts[1:4]):
                r, reuse = regs_of(s)
                if reuse and r:
                    cur_reuse[slot] = r
        prev_reuse = cur_reuse
    return stats


def main():
    args = sys.argv[1:]
    path = args[0]
    match = args[args.index("--match") + 1] if "--match" in args else "gemm_f32_kernel"
    dump = "--dump" in args
    brief = "--brief" in args
    for name, body in functions(path):
        if match not in name:
            continue
        lp = loop_of(body)
        if not lp or lp[0] == 0:
            continue
        n, t, end, rng = lp
        cls = Counter(classify(opcode(x[1])) for x in rng)
        st = banks(rng)
        nonffma = len(rng) - cls["FFMA"]
        f = max(st["ffma"], 1)
        if brief:
            short = re.sub(r"^_Z15gemm_f32_kernelILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELb([01])ELb([01])ELi\d+ELb([01])(?:ELi(\d+))?E.*",
                           lambda m: f"{m[1]}x{m[2]}x{m[3]}/{m[4]}x8 {'T' if m[5] == '1' else 'N'}{'T' if m[6] == '1' else 'N'}"
                                     f"{' split' if m[7] == '1' else ''} P={m[8] or 0}", name)
            print(f"{short:32s} insts {len(rng):5d} FFMA {cls['FFMA']:4d} ({100.0 * cls['FFMA'] / len(rng):4.1f}%) "
                  f"int/addr {cls['int/addr'] + cls['other:VIADD']:3d} LDS {cls['LDS.128']:3d} LDG {cls['LDG']:2d} "
                  f"STS {cls['STS']:2d} BRA {cls['BRA']:2d} LDL/STL {cls['LDL'] + cls['STL']} | reads/FFMA "
                  f"{st['bank_reads'] / f:.2f} pair2 {st['pair2'] / f:.3f} pair4 {st['pair4'] / f:.3f} "
                  f"bank0/1 {st['bank0']}/{st['bank1']} port-cycles/FFMA {st['port_cycles'] / f:.3f}")
            continue
        print(f"{name}\n  loop 0x{t:x}-0x{end:x}: {len(rng)} instructions, FFMA {cls['FFMA']} "
              f"({100.0 * cls['FFMA'] / len(rng):.1f}%), non-FFMA {nonffma}")
        print("  " + ", ".join(f"{k} {v}" for k, v in sorted(cls.items(), key=lambda kv: -kv[1]) if k != "FFMA"))
        print(f"  banks: bank reads/FFMA {st['bank_reads'] / f:.2f}, reuse hits/FFMA {st['reuse_hits'] / f:.2f}, "
              f"pair2 {st['pair2']} ({st['pair2'] / f:.3f}), pair4 {st['pair4']} ({st['pair4'] / f:.3f}), "
              f"triple2 {st['triple2']} ({st['triple2'] / f:.3f}), bank0/bank1 reads {st['bank0']}/{st['bank1']}, "
              f"port cycles (max reads in one bank, >= 1) {st['port_cycles'] / f:.3f} a FFMA")
        if dump:
            for addr, text in rng:
                print(f"    {addr:05x} {text}")


if __name__ == "__main__":
    main()
