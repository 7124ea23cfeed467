#!/usr/bin/env python3
"""PyTorch's dst.copy_(src) and x.sum() (f32) at the traffic sizes of dev/membound/pdl_harness.cu,
measured its way (steady: rotating sets >= 2 x L2, a batch queued behind untimed 256 MB fills,
events around the batch, median of batches). Session 13, helper h13f; run by run_s14_pdl.sh.
Prints one line per (op, MiB): us, GB/s, % of torch's own 1 GiB copy (2 GiB traffic)."""
import math
import statistics
import time

import torch

MIB = 1 << 20
SIZES = [16, 24, 32, 48, 64, 96, 128, 256, 1024, 2048]
BATCHES = 15
dev = torch.device("cuda")
l2 = torch.cuda.get_device_properties(0).L2_cache_size or 50 * 10**6
pool = torch.rand(1 << 28, device=dev)  # 1 GiB of f32 in [0, 1)
out = torch.empty(1 << 28, device=dev)
flush = torch.empty(256 * MIB // 4, device=dev)
torch.cuda.synchronize()
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
e0.record()
for i in range(8):
    flush.fill_(i)
e1.record()
e1.synchronize()
fill_ms = max(e0.elapsed_time(e1) / 8, 0.01)


def steady(fn, sets, est_us):
    for s in range(sets):
        fn(s)
    torch.cuda.synchronize()
    probe = max(sets, 4)
    h0 = time.perf_counter()
    for i in range(probe):
        fn(i % sets)
    host_ms = (time.perf_counter() - h0) * 1e3 / probe
    torch.cuda.synchronize()
    calls = max(math.ceil(1000.0 / est_us), 2 * sets)
    calls = min((calls + sets - 1) // sets * sets, 400)
    t = []
    for _ in range(BATCHES):
        for i in range(min(max(math.ceil((1.5 * calls * host_ms + 0.05) / fill_ms), 1), 400)):
            flush.fill_(i & 0xFF)
        e0.record()
        for i in range(calls):
            fn(i % sets)
        e1.record()
        e1.synchronize()
        t.append(e0.elapsed_time(e1) * 1e3 / calls)
    return statistics.median(t)


res = {}
for op in ("copy", "sum"):
    for mib in SIZES:
        traffic = mib * MIB
        per_set = traffic // 2 if op == "copy" else traffic  # bytes read
        if per_set > (1 << 30):
            continue
        n = per_set // 4
        sets = max(1, min(math.ceil(2 * l2 / traffic), (1 << 30) // per_set))
        if op == "copy":
            fn = lambda s: out[s * n:(s + 1) * n].copy_(pool[s * n:(s + 1) * n])
        else:
            fn = lambda s: pool[s * n:(s + 1) * n].sum()
        us = steady(fn, sets, traffic / 2.5e6 + 3.0)
        if op == "copy":
            torch.cuda.synchronize()
            assert torch.equal(out[:sets * n], pool[:sets * n]), "torch copy_ check failed"
        else:
            ref = pool[:n].double().sum().item()
            got = pool[:n].sum().item()
            assert abs(got - ref) <= 2e-5 * ref, f"torch sum check failed: {got} vs {ref}"
        res[(op, mib)] = (traffic + (4 if op == "sum" else 0), us)
ref_b, ref_us = res[("copy", 2048)]
ref_gbps = ref_b / ref_us * 1e-3
print(f"TORCH {torch.__version__}: steady, % of its 1 GiB copy_ = {ref_gbps:.1f} GB/s")
for (op, mib), (b, us) in res.items():
    gbps = b / us * 1e-3
    print(f"TORCH {op:4s} {mib:5d} MiB {us:9.2f} us {gbps:8.1f} GB/s {100 * gbps / ref_gbps:6.1f}%")
