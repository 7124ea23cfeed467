#!/usr/bin/env python3
"""PyTorch reference numbers for bench_adamw (bench/adamw.c).

The same 148 GPT-2 small tensors (124,439,808 parameters, each its own
allocation), random params and grads, and the same method: 3 warm-ups, the
median of --reps timed calls with CUDA events, each after an untimed 2 GiB
fill that evicts L2 and keeps the GPU busy while Python issues the timed work
(so the time is the device's, as for ours); the 1 GiB device-to-device copy
measured in the same process. Timed:
  adamw       torch.optim.AdamW(fused=True).step()
  adamw_clip  torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True) + that step
  adamw_foreach  torch.optim.AdamW(foreach=True).step() (the default, for scale)
  adamw_graph  the fused step with capturable=True, captured in a CUDA graph and replayed
               (no host launch cost in the time whatever the host's speed)
GB/s: 28 bytes per parameter (param r+w, grad r, exp_avg r+w, exp_avg_sq r+w),
32 with clipping (one more read of the grads): the bytes that must move.

  torch_adamw.py [--reps N] [--json PATH]
  torch_adamw.py --combine OURS.json TORCH.json --out COMBINED.json
      joins bench_adamw's JSON with this script's into DESIGN.md's results
      format (family "membound", reference = PyTorch, ratio = ours / PyTorch)
      and prints a markdown table.
"""
import argparse
import datetime
import json
import sys

DELAY_BYTES = 2 << 30


def gpt2_shapes():
    c = 768
    shapes = [(50257, c), (1024, c)]
    for _ in range(12):
        shapes += [(c,), (c,), (c, 3 * c), (3 * c,), (c, c), (c,), (c,), (c,), (c, 4 * c), (4 * c,), (4 * c, c), (c,)]
    return shapes + [(c,), (c,)]


def measure(args):
    import torch

    from torch_timing import Timer

    dev = torch.device("cuda")
    torch.manual_seed(0)
    timer = Timer(flush_bytes=DELAY_BYTES)

    def median_ms(fn):
        return timer.median_ms(fn, args.reps)

    delay, half = timer.flush, DELAY_BYTES // 2
    copy_gbps = 2 * half / (median_ms(lambda: delay[half:].copy_(delay[:half])) * 1e-3) / 1e9

    def make_params():
        ps = [torch.nn.Parameter(torch.empty(s, device=dev).uniform_(-0.05, 0.05)) for s in gpt2_shapes()]
        for p in ps:
            p.grad = torch.empty_like(p).uniform_(-0.01, 0.01)
        return ps

    params = make_params()
    nparams = sum(p.numel() for p in params)
    hyper = dict(lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    fused = torch.optim.AdamW(params, fused=True, **hyper)
    print(f"GPT-2 small: {len(params)} tensors, {nparams} parameters; copy D2D 1 GiB: {copy_gbps:.1f} GB/s "
          f"(read + write); PyTorch {torch.__version__}\n")
    print(f"{'op':<15} {'ms':>9} {'GB/s':>9}")
    results = []

    def record(op, ref_name, bytes_per_param, fn):
        ms = median_ms(fn)
        gbps = bytes_per_param * nparams / (ms * 1e-3) / 1e9
        results.append({"op": op, "ref_name": ref_name, "bytes_per_param": bytes_per_param, "ms": ms, "GBps": gbps})
        print(f"{op:<15} {ms:9.4f} {gbps:9.1f}", flush=True)

    def clip_step():
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        fused.step()

    record("adamw", "torch.optim.AdamW(fused=True).step()", 28, fused.step)
    record("adamw_clip", "clip_grad_norm_(foreach=True) + AdamW(fused=True).step()", 32, clip_step)
    del fused
    params2 = make_params()
    foreach = torch.optim.AdamW(params2, foreach=True, **hyper)
    record("adamw_foreach", "torch.optim.AdamW(foreach=True).step()", 28, foreach.step)
    del foreach, params2
    # The fused step captured in a CUDA graph (capturable=True): PyTorch's GPU time without its host launch
    # cost, which the eager step's time may include when the host is slower than the fill before it (the eager
    # reference measured 1.34 ms in one run and 1.57 ms in another, ours 1.20 ms in both).
    params3 = make_params()
    graphed = torch.optim.AdamW(params3, fused=True, capturable=True, **hyper)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            graphed.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed.step()
    record("adamw_graph", "torch.optim.AdamW(fused=True, capturable=True).step() in a CUDA graph", 28, graph.replay)
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": " ".join(sys.argv), "reps": args.reps, "copy_GBps": copy_gbps, "params": nparams,
            "tensors": len(params)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)


def combine(ours_path, torch_path, out_path):
    with open(ours_path) as f:
        ours = json.load(f)
    with open(torch_path) as f:
        ref = json.load(f)
    mine = {r["op"]: r for r in ours["results"]}
    theirs = {r["op"]: r for r in ref["results"]}
    n, copy = ours["meta"]["params"], ours["meta"]["copy_GBps"]
    shape = {"model": "GPT-2 small", "params": n, "tensors": ours["meta"]["tensors"]}
    pairs = [("adamw", "adamw", "adamw_kernel"), ("adamw", "adamw_graph", "adamw_kernel"),
             ("adamw_clip", "adamw_clip", "adamw_clip_kernel"), ("adamw", "adamw_foreach", "adamw_kernel")]
    pairs = [p for p in pairs if p[1] in theirs]  # runs before session 14 have no adamw_graph
    results = []
    for op, ref_op, kernel_op in pairs:
        o, t = mine[op], theirs[ref_op]
        results.append({
            "family": "membound", "op": op, "dtype": "f32", "shape": shape, "bytes": o["bytes_per_param"] * n,
            "ours": o["GBps"], "reference": t["GBps"],
            "ref_name": f"{t['ref_name']} (PyTorch {ref['meta']['torch']})", "unit": "GB/s",
            "ratio": o["GBps"] / t["GBps"], "ours_ms": o["ms"], "reference_ms": t["ms"],
            "ours_name": o["what"], "ours_kernel_ms": mine[kernel_op]["ms"], "copy_GBps": copy,
            "copy_ratio": o["GBps"] / copy})
    meta = dict(ours["meta"])
    meta["method"] = ("median of reps after 3 warm-ups, CUDA events; before each timed call an untimed 2 GiB fill "
                      "(evicts L2, hides host overheads); GB/s = bytes that must move (28 B/param, 32 with clipping)"
                      " / time")
    meta["reference"] = {"torch": ref["meta"]["torch"], "cuda": ref["meta"]["cuda"],
                         "copy_GBps": ref["meta"]["copy_GBps"], "command": ref["meta"]["command"]}
    meta["ours_other"] = {r["op"]: {"what": r["what"], "ms": r["ms"], "GBps": r["GBps"]} for r in ours["results"]}
    with open(out_path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    print(f"GPU {meta['gpu']}, GPT-2 small ({n} parameters, {shape['tensors']} tensors), copy {copy:.0f} GB/s, "
          f"PyTorch {ref['meta']['torch']}\n")
    print("| op | ours | ours ms | ours GB/s | % of copy | reference | ref ms | ref GB/s | ours / ref |")
    print("|---|---|---:|---:|---:|---|---:|---:|---:|")
    for r in results:
        print(f"| {r['op']} | {r['ours_name']} | {r['ours_ms']:.3f} | {r['ours']:.0f} | {100 * r['copy_ratio']:.0f}% | "
              f"{r['ref_name']} | {r['reference_ms']:.3f} | {r['reference']:.0f} | {r['ratio']:.2f}x |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--json")
    p.add_argument("--combine", nargs=2, metavar=("OURS", "TORCH"))
    p.add_argument("--out")
    args = p.parse_args()
    if args.combine:
        if not args.out:
            p.error("--combine needs --out")
        combine(args.combine[0], args.combine[1], args.out)
    else:
        if args.reps < 20:
            p.error("--reps must be >= 20")
        measure(args)


if __name__ == "__main__":
    main()
