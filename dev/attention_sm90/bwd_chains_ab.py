#!/usr/bin/env python3
"""Session 10 (helper h10a, README "Session 10 (helper h10a)"): the backward of a library with two dQ
accumulation chains (NEW) against the one before (BASE), in one process.

Two chains change the association of dQ's float sums, so dQ's bits may move; dK and dV must not. Per case
(bf16 and f16, [B, S, H, D], causal and not, S_q != S_kv both ways, GQA / MQA, odd key-block counts, the
bench's D = 256 shapes at S = 4k and 8k): BASE's forward once for O and lse, then BASE's backward and
NEW's backward twice, outputs poisoned (0xFFFF: NaN) first. Required: no poison left; NEW's two runs
bitwise equal; dK, dV bitwise equal to BASE's; dQ bitwise equal to BASE's where NEW ran one chain (its
cml__attention_bwd_sm90_chain2_runs counter did not move), else close: ||dQ_new - dQ_base|| / ||dQ_base||
<= 2e-3 and max |dQ_new - dQ_base| / max |dQ_base| <= 1e-2 (a last-bit difference of the 16-bit value:
2^-8 relative for bf16). Exits 1 on a failure.
The environment's CML_ATT_BWD_DQ_CHAINS reaches NEW only (BASE does not read it): =1 makes every case a
one-chain case (then everything must be bitwise equal: the one-chain path unchanged), =2 every case a
two-chain one.

    bwd_chains_ab.py BASE/libcamel.so NEW/libcamel.so
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench"))
from attention_side_by_side import Camel  # noqa: E402

CML_F16, CML_BF16 = 1, 2  # camel/dtype.h

# B, S_q, S_kv, H_q, H_kv, D, causal
CASES = [(1, 4096, 4096, 8, 8, 256, True), (1, 4096, 4096, 8, 8, 256, False), (1, 8192, 8192, 4, 4, 256, True),
         (1, 300, 4100, 4, 1, 256, True), (1, 300, 4100, 4, 1, 256, False), (1, 4160, 4096, 2, 2, 256, True),
         (2, 4097, 4097, 4, 2, 128, True), (2, 4097, 4097, 4, 2, 128, False), (1, 200, 4103, 4, 2, 128, False),
         (1, 4200, 4100, 2, 2, 64, True), (1, 4097, 4097, 8, 8, 64, False), (2, 1000, 300, 4, 2, 256, True),
         (2, 77, 77, 2, 2, 64, False), (1, 1025, 1025, 8, 1, 128, True), (3, 1, 1, 2, 2, 256, True)]


def main():
    import torch
    base, new = Camel(sys.argv[1]), Camel(sys.argv[2])
    runs2 = new.lib.cml__attention_bwd_sm90_chain2_runs
    runs2.restype = ctypes.c_longlong
    ok, n2 = True, 0
    for (B, Sq, Sk, Hq, Hkv, D, causal) in CASES:
        for dt, tdt, name in ((CML_BF16, torch.bfloat16, "bf16"), (CML_F16, torch.float16, "f16")):
            torch.manual_seed(B * 7919 + Sq * 31 + Sk + D + dt)
            q = torch.randn(B, Sq, Hq, D, device="cuda").to(tdt)
            k = torch.randn(B, Sk, Hkv, D, device="cuda").to(tdt)
            v = torch.randn(B, Sk, Hkv, D, device="cuda").to(tdt)
            do = torch.randn(B, Sq, Hq, D, device="cuda").to(tdt)
            o = torch.empty_like(q)
            lse = torch.empty(B, Hq, Sq, device="cuda", dtype=torch.float32)
            torch.cuda.synchronize()  # the inputs are written before the library's stream reads them
            desc = base.lib.cml_attention_desc_bshd(B, Sq, Sk, Hq, Hkv, D, causal, dt)
            base.fwd(desc, o, lse, q, k, v)
            torch.cuda.synchronize()
            outs = []
            r0 = runs2()
            for lib in (base, new, new):
                g = [torch.full(t.shape, -1, dtype=torch.int16, device="cuda") for t in (q, k, v)]  # 0xFFFF: NaN
                torch.cuda.synchronize()  # the poison is in place before the backward writes
                lib.bwd(desc, *g, do, q, k, v, o, lse)
                torch.cuda.synchronize()
                outs.append(g)
            two = runs2() - r0
            if two not in (0, 2):
                ok = False
                print(f"  {two} of NEW's 2 runs had two chains: FAIL")
            chains = 2 if two else 1
            n2 += chains == 2
            poison = [int((t == -1).sum()) for g in outs for t in g]
            rep = all(torch.equal(a, b) for a, b in zip(outs[1], outs[2]))
            kv = torch.equal(outs[0][1], outs[1][1]) and torch.equal(outs[0][2], outs[1][2])
            dq_b, dq_n = outs[0][0].view(tdt).float(), outs[1][0].view(tdt).float()
            same = torch.equal(outs[0][0], outs[1][0])
            diff = (dq_n - dq_b)
            rel = (diff.norm() / dq_b.norm().clamp_min(1e-30)).item()
            mx = (diff.abs().max() / dq_b.abs().max().clamp_min(1e-30)).item()
            frac = (outs[0][0] != outs[1][0]).float().mean().item()
            good = not any(poison) and rep and kv and (same if chains == 1 else rel <= 2e-3 and mx <= 1e-2)
            ok &= good
            print(f"{name} D={D:<3} B={B} Sq={Sq:<4} Sk={Sk:<4} H={Hq}/{Hkv} {'causal' if causal else 'full  '} "
                  f"chains {chains}: dQ {'bitwise equal' if same else f'rel {rel:.2e} max {mx:.2e} differ {frac:.1%}'}"
                  f", dK dV equal {kv}, repeat equal {rep}, unwritten {sum(poison)}{'' if good else '  FAIL'}",
                  flush=True)
    print(f"bwd_chains_ab: {'all ok' if ok else 'FAILURES'} ({n2} cases with two chains, "
          f"CML_ATT_BWD_DQ_CHAINS={os.environ.get('CML_ATT_BWD_DQ_CHAINS', 'unset')})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
