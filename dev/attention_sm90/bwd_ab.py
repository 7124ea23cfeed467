#!/usr/bin/env python3
"""Session 8: dQ, dK, dV of two libcamel builds compared bitwise (README "Session 8").

Loads OLD and NEW libcamel.so in one process (ctypes, RTLD_LOCAL: each resolves its own symbols),
runs OLD's forward once per case for O and lse, then each library's backward on the same inputs
with its outputs poisoned (0xFF bytes) first, and requires every byte of dQ, dK and dV to agree:
the FUSEDQ change (no convert kernel; prep writes the zero tiles) must not move a bit. Cases: D =
64 / 128 / 256, bf16 and f16, [B, S, H, D], causal and not, S_q != S_kv both ways (causal query
tiles that see no key), GQA and MQA, lengths 1 .. 2048, a negative scale. Exits 1 on a difference.

The library works on its context's own stream (non-blocking: no implicit order with PyTorch's
default stream), so the script synchronizes the device after every PyTorch fill and before every
library call. (Session 8, part 2: without that, a poison fill of dV could still be pending when a
backward started -- seen under a GPU shared with five other processes -- and then ran after it,
as the persistent main kernel held every SM: dV "unwritten" in 2-2.5M elements of the
B = 4, S = 2048 cases, for the old library as for the new one.)
--old-env NAME=VALUE sets NAME in the environment for OLD's first backward only (the library reads
its switches once, at their first use): e.g. the same build twice, as two copies of the file,
CML_ATT_BWD_PDL=0 for the first.

    bwd_ab.py [--old-env NAME=VALUE] OLD/libcamel.so NEW/libcamel.so
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench"))
from attention_side_by_side import Camel  # noqa: E402

CML_F16, CML_BF16 = 1, 2  # camel/dtype.h

# B, S_q, S_kv, H_q, H_kv, causal, negative scale
CASES = [(2, 1000, 300, 4, 2, True, False), (2, 1000, 300, 4, 2, True, True), (1, 300, 1000, 2, 1, True, False),
         (2, 77, 77, 2, 2, False, False), (1, 1025, 1025, 8, 1, True, False), (3, 1, 1, 2, 2, True, False),
         (1, 129, 1025, 4, 4, False, True), (2, 1000, 1000, 2, 1, True, True), (4, 2048, 2048, 4, 4, False, False),
         (4, 2048, 2048, 4, 4, True, False)]


def main():
    import torch
    args = sys.argv[1:]
    old_env = None
    if args and args[0] == "--old-env":
        old_env = args[1].split("=", 1)
        args = args[2:]
    old, new = Camel(args[0]), Camel(args[1])
    ok = True
    for dt, tdt, name in ((CML_BF16, torch.bfloat16, "bf16"), (CML_F16, torch.float16, "f16")):
        for D in (64, 128, 256):
            for (B, Sq, Sk, Hq, Hkv, causal, neg) in CASES:
                torch.manual_seed(B * 7919 + Sq * 31 + Sk + D)
                q = torch.randn(B, Sq, Hq, D, device="cuda").to(tdt)
                k = torch.randn(B, Sk, Hkv, D, device="cuda").to(tdt)
                v = torch.randn(B, Sk, Hkv, D, device="cuda").to(tdt)
                do = torch.randn(B, Sq, Hq, D, device="cuda").to(tdt)
                o = torch.empty_like(q)
                lse = torch.empty(B, Hq, Sq, device="cuda", dtype=torch.float32)
                torch.cuda.synchronize()  # the inputs are written before the library's stream reads them
                desc = old.lib.cml_attention_desc_bshd(B, Sq, Sk, Hq, Hkv, D, causal, dt)
                if neg:
                    desc.scale = -desc.scale
                old.fwd(desc, o, lse, q, k, v)
                torch.cuda.synchronize()
                outs = []
                for lib in (old, new):
                    g = [torch.full(t.shape, -1, dtype=torch.int16, device="cuda") for t in (q, k, v)]  # 0xFFFF: NaN
                    torch.cuda.synchronize()  # the poison is in place before the backward writes
                    if lib is old and old_env:
                        os.environ[old_env[0]] = old_env[1]
                    lib.bwd(desc, *g, do, q, k, v, o, lse)
                    if lib is old and old_env:
                        del os.environ[old_env[0]]
                    torch.cuda.synchronize()
                    outs.append(g)
                same = [torch.equal(a, b) for a, b in zip(*outs)]
                poison = [int((t == -1).sum()) for t in outs[1]]
                good = all(same) and not any(poison)
                ok &= good
                print(f"{name} D={D:<3} B={B} Sq={Sq:<4} Sk={Sk:<4} H={Hq}/{Hkv} {'causal' if causal else 'full  '}"
                      f"{' scale<0' if neg else '        '} dQ dK dV bitwise equal: {same}, unwritten (new): {poison}"
                      f"{'' if good else '  FAIL'}", flush=True)
    print("bwd_ab: " + ("all equal" if ok else "DIFFERENCES"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
