#!/usr/bin/env python3
"""Where two libraries' forward O / lse differ for one shape (session 10: h10b's 192-row D = 64 kernel
against the 128-row one at S_q 1500 > S_kv 1000 causal). Usage (from the repository root): python3 dev/attention_sm90/odiff.py LIB_A LIB_B"""
import math, os, subprocess, sys
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
B, Sq, Sk, H, D = 2, 1500, 1000, 8, 64
if len(sys.argv) == 4:  # child: run one library, save O and lse
    import torch
    from attention_side_by_side import CML_BF16, Camel
    camel = Camel(sys.argv[1]); dev = torch.device("cuda")
    with torch.cuda.stream(torch.cuda.ExternalStream(camel.stream)):
        g = torch.Generator(device=dev); g.manual_seed(1000 + 10); s3 = math.sqrt(3.0)
        rand = lambda S: torch.empty(B, S, H, D, device=dev, dtype=torch.bfloat16).uniform_(-s3, s3, generator=g)
        q, k, v = rand(Sq), rand(Sk), rand(Sk)
        o = torch.empty(B, Sq, H, D, device=dev, dtype=torch.bfloat16); lse = torch.empty(B, H, Sq, device=dev)
        o.view(torch.uint8).fill_(0xFF); lse.view(torch.uint8).fill_(0xFF)
        camel.fwd(camel.lib.cml_attention_desc_bshd(B, Sq, Sk, H, H, D, True, CML_BF16), o, lse, q, k, v)
        torch.cuda.synchronize()
        torch.save({"o": o.cpu(), "lse": lse.cpu()}, sys.argv[2])
    sys.exit(0)
import torch
for i, lib in enumerate(sys.argv[1:3]):
    subprocess.run([sys.executable, __file__, lib, f"/tmp/odiff_{i}.pt", "child"], check=True)
a, b = torch.load("/tmp/odiff_0.pt"), torch.load("/tmp/odiff_1.pt")
for name in ("o", "lse"):
    x, y = a[name], b[name]
    bx, by = x.view(torch.int16 if x.dtype == torch.bfloat16 else torch.int32), y.view(torch.int16 if y.dtype == torch.bfloat16 else torch.int32)
    dif = (bx != by)
    print(f"{name}: {int(dif.sum())} of {dif.numel()} elements differ in bits")
    if dif.any():
        idx = dif.nonzero()
        rows = idx[:, 1] if name == "o" else idx[:, 2]
        print(f"  rows (s) {int(rows.min())}..{int(rows.max())}, distinct rows {len(set(rows.tolist()))}")
        xf, yf = x.float()[dif], y.float()[dif]
        print(f"  max |a - b| {float((xf - yf).abs().max()):.3e}; max |a| there {float(xf.abs().max()):.3e}; "
              f"a zeros {int((xf == 0).sum())}, b zeros {int((yf == 0).sum())}, equal as floats {int((xf == yf).sum())}")
        for j in range(min(6, len(idx))):
            t = tuple(idx[j].tolist())
            print(f"  {t}: a {x[t].item()!r} b {y[t].item()!r} bits {int(bx[t]) & 0xFFFFFFFF:#x} {int(by[t]) & 0xFFFFFFFF:#x}")
