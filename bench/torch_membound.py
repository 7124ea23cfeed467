#!/usr/bin/env python3
"""PyTorch reference numbers for `camel bench membound` (apps/camel/cmd_bench_membound.c).

Same shapes, same bytes-that-must-move counts and the same method: random
inputs, 3 warm-ups, the median of --reps timed calls with CUDA events, each
call after an untimed fill of a 256 MB buffer so that L2 holds none of its
data; the 1 GiB device-to-device copy measured in the same process.

  torch_membound.py [--reps N] [--json PATH] [--quick] [--ops a,b,...]
      measures PyTorch and prints a table;
  torch_membound.py --combine OURS.json TORCH.json --out COMBINED.json
      joins camel bench membound's JSON with this script's into DESIGN.md's results
      format (reference = PyTorch, ratio = ours / PyTorch, plus the fraction of
      the copy bandwidth) and prints a markdown table (docs/PERFORMANCE.md);
  torch_membound.py --plot COMBINED.json --out CHART.png
      draws the fraction of the copy bandwidth, ours and PyTorch's, per op and
      shape (needs matplotlib).
"""
import argparse
import datetime
import json
import statistics
import sys

SHAPES = [(4096, 1024), (4096, 4096), (16384, 8192), (1024, 32768), (256, 262144)]
OPS = ["sum", "softmax", "softmax_bwd", "layernorm", "layernorm_bwd", "rmsnorm", "rmsnorm_bwd", "cross_entropy",
       "cross_entropy_bwd", "convert_scaled_e4m3", "convert_scaled_e4m3_amax"]
REF_NAMES = {
    "sum": "x.sum(-1)",
    "softmax": "torch.softmax",
    "softmax_bwd": "torch._softmax_backward_data",
    "layernorm": "F.layer_norm",
    "layernorm_bwd": "aten.native_layer_norm_backward",
    "rmsnorm": "F.rms_norm",
    "rmsnorm_bwd": "autograd.grad(F.rms_norm) wrt x, weight",
    "cross_entropy": "F.cross_entropy(reduction='none')",
    "cross_entropy_bwd": "autograd.grad(F.cross_entropy)",
    "convert_scaled_e4m3": "(x * s).to(torch.float8_e4m3fn)",
    "convert_scaled_e4m3_amax": "(x * s).to(torch.float8_e4m3fn), x.abs().amax()",
}
FP8_SCALE = 64.0  # as in cmd_bench_membound.c
FLAT = 1 << 28  # 1 GiB of f32
FLUSH_BYTES = 256 << 20


def op_bytes(op, rows, cols, es):
    """Bytes that must move: the same counts as op_bytes() in apps/camel/cmd_bench_membound.c."""
    rc, r, c, n = rows * cols * es, rows, cols * es, rows * cols
    return {
        "sum": rc + r * es,
        "softmax": 2 * rc,
        "softmax_bwd": 3 * rc,
        "layernorm": 2 * rc + 2 * c + 8 * r,
        "layernorm_bwd": 3 * rc + 3 * c + 8 * r,
        "rmsnorm": 2 * rc + c + 4 * r,
        "rmsnorm_bwd": 3 * rc + 2 * c + 4 * r,
        "cross_entropy": rc + 12 * r,
        "cross_entropy_bwd": 2 * rc + 12 * r,
        "convert_scaled_e4m3": rc + n + 4,
        "convert_scaled_e4m3_amax": rc + n + 8,
    }[op]


def measure(args):
    import torch
    import torch.nn.functional as F

    dev = torch.device("cuda")
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=dev)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def median_ms(fn):
        for _ in range(3):
            fn()
        times = []
        for i in range(args.reps):
            flush.fill_(i & 0xFF)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        return statistics.median(times)

    wanted = set(args.ops.split(",")) if args.ops else set(OPS)
    unknown = wanted - set(OPS)
    if unknown:
        sys.exit(f"torch_membound.py: unknown ops {sorted(unknown)}; the ops are {', '.join(OPS)}")
    s = torch.tensor(FP8_SCALE, device=dev)  # a device-side scale, like ours
    src = torch.rand(FLAT, device=dev) * 6 - 3
    dst = torch.empty_like(src)
    copy_gbps = 2 * src.numel() * 4 / (median_ms(lambda: dst.copy_(src)) * 1e-3) / 1e9
    del dst
    print(f"copy D2D 1 GiB: {copy_gbps:.1f} GB/s (read + write)\n")
    print(f"{'op':<24} {'dtype':<5} {'rows x cols':<14} {'ms':>10} {'GB/s':>9}")
    results = []

    def record(op, dtype_name, rows, cols, es, fn):
        if op not in wanted:
            return
        ms = median_ms(fn)
        gbps = op_bytes(op, rows, cols, es) / (ms * 1e-3) / 1e9
        results.append({"op": op, "dtype": dtype_name, "shape": {"rows": rows, "cols": cols}, "ms": ms,
                        "GBps": gbps, "ref_name": REF_NAMES[op] if rows > 1 else "x.sum()"})
        print(f"{op:<24} {dtype_name:<5} {rows:>6}x{cols:<7} {ms:10.4f} {gbps:9.1f}", flush=True)

    shapes = SHAPES[:2] if args.quick else SHAPES
    for rows, cols in shapes:
        for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            es = 4 if dtype == torch.float32 else 2
            x = (torch.rand(rows, cols, device=dev) * 6 - 3).to(dtype)
            dy = (torch.rand(rows, cols, device=dev) * 2 - 1).to(dtype)
            w = (torch.rand(cols, device=dev) + 0.5).to(dtype)
            b = (torch.rand(cols, device=dev) - 0.5).to(dtype)
            t = torch.randint(0, cols, (rows,), device=dev)
            with torch.no_grad():
                _, mean, rstd = torch.ops.aten.native_layer_norm(x, [cols], w, b, 1e-5)
                record("sum", name, rows, cols, es, lambda: x.sum(-1))
                record("softmax", name, rows, cols, es, lambda: torch.softmax(x, -1))
                record("softmax_bwd", name, rows, cols, es,
                       lambda: torch._softmax_backward_data(dy, x, -1, dtype))
                record("layernorm", name, rows, cols, es, lambda: F.layer_norm(x, (cols,), w, b, 1e-5))
                record("layernorm_bwd", name, rows, cols, es,
                       lambda: torch.ops.aten.native_layer_norm_backward(dy, x, [cols], mean, rstd, w, b,
                                                                         [True, True, True]))
                record("rmsnorm", name, rows, cols, es, lambda: F.rms_norm(x, (cols,), w, 1e-5))
                record("convert_scaled_e4m3", name, rows, cols, es, lambda: (x * s).to(torch.float8_e4m3fn))
                record("convert_scaled_e4m3_amax", name, rows, cols, es,
                       lambda: ((x * s).to(torch.float8_e4m3fn), x.abs().amax()))
                record("cross_entropy", name, rows, cols, es,
                       lambda: F.cross_entropy(x, t, reduction="none"))
            if "rmsnorm_bwd" in wanted:
                xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
                yr = F.rms_norm(xr, (cols,), wr, 1e-5)
                record("rmsnorm_bwd", name, rows, cols, es,
                       lambda: torch.autograd.grad(yr, (xr, wr), dy, retain_graph=True))
                del xr, wr, yr
            xg = x.detach().requires_grad_()
            loss = F.cross_entropy(xg, t, reduction="none")
            dloss = (torch.rand(rows, device=dev) + 0.5).to(loss.dtype)
            record("cross_entropy_bwd", name, rows, cols, es,
                   lambda: torch.autograd.grad(loss, xg, dloss, retain_graph=True))
            del x, dy, w, b, t, mean, rstd, xg, loss, dloss
            torch.cuda.empty_cache()
    with torch.no_grad():
        record("sum", "f32", 1, FLAT, 4, lambda: src.sum())
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": " ".join(sys.argv), "reps": args.reps, "copy_GBps": copy_gbps}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)


def combine(ours_path, torch_path, out_path):
    with open(ours_path) as f:
        ours = json.load(f)
    with open(torch_path) as f:
        ref = json.load(f)
    key = lambda r: (r["op"], r["dtype"], r["shape"]["rows"], r["shape"]["cols"])
    torch_by_key = {key(r): r for r in ref["results"]}
    copy = ours["meta"]["copy_GBps"]
    results = []
    for r in ours["results"]:
        t = torch_by_key.get(key(r))
        rec = {"family": "membound", "op": r["op"], "dtype": r["dtype"], "shape": r["shape"], "bytes": r["bytes"],
               "ours": r["ours"], "reference": t["GBps"] if t else None,
               "ref_name": (t["ref_name"] if t else "n/a") + " (PyTorch " + ref["meta"]["torch"] + ")",
               "unit": "GB/s", "ratio": r["ours"] / t["GBps"] if t else None, "ours_ms": r["ms"],
               "reference_ms": t["ms"] if t else None, "copy_GBps": copy, "copy_ratio": r["ours"] / copy}
        results.append(rec)
    meta = dict(ours["meta"])
    meta["reference"] = {"torch": ref["meta"]["torch"], "cuda": ref["meta"]["cuda"],
                         "copy_GBps": ref["meta"]["copy_GBps"], "command": ref["meta"]["command"]}
    with open(out_path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    print(f"GPU {meta['gpu']}, copy {copy:.0f} GB/s (torch's copy {ref['meta']['copy_GBps']:.0f} GB/s), "
          f"PyTorch {ref['meta']['torch']}\n")
    print("| op | dtype | rows x cols | MiB moved | ours GB/s | % of copy | torch GB/s | ours / torch |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    missed_bw, missed_torch = 0, 0
    for r in results:
        mib = r["bytes"] / 2**20
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] else "n/a"
        ref_gbps = f"{r['reference']:.0f}" if r["reference"] else "n/a"
        print(f"| {r['op']} | {r['dtype']} | {r['shape']['rows']} x {r['shape']['cols']} | {mib:.0f} | "
              f"{r['ours']:.0f} | {100 * r['copy_ratio']:.0f}% | {ref_gbps} | {ratio} |")
        missed_bw += mib >= 16 and r["copy_ratio"] < 0.9
        missed_torch += r["ratio"] is not None and r["ratio"] < 1.0
    print(f"\n{len(results)} results: {missed_bw} under 90% of copy bandwidth (of those moving >= 16 MiB), "
          f"{missed_torch} slower than PyTorch")


def plot(combined_path, out_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(combined_path) as f:
        data = json.load(f)
    copy = data["meta"]["copy_GBps"]
    fig, axes = plt.subplots(2, 1, figsize=(13, 7), sharey=True)
    for ax, dtype in zip(axes, ("f32", "bf16")):
        rows = [r for r in data["results"] if r["dtype"] == dtype]
        labels = [f"{r['op']}\n{r['shape']['rows']}x{r['shape']['cols']}" for r in rows]
        xs = range(len(rows))
        ax.bar([x - 0.2 for x in xs], [100 * r["ours"] / copy for r in rows], 0.4, label="ours")
        ax.bar([x + 0.2 for x in xs], [100 * (r["reference"] or 0) / copy for r in rows], 0.4, label="PyTorch")
        ax.axhline(90, color="gray", linestyle="--", linewidth=0.8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, rotation=90, fontsize=5)
        ax.set_ylabel(f"{dtype}: % of copy BW")
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"memory-bound kernels on {data['meta']['gpu']} (copy {copy:.0f} GB/s = 100%, dashed: 90%)")
    fig.tight_layout()
    fig.savefig(out_path, dpi=90)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--json")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--ops", help="comma-separated ops to measure (default: all)")
    p.add_argument("--combine", nargs=2, metavar=("OURS", "TORCH"))
    p.add_argument("--plot", metavar="COMBINED")
    p.add_argument("--out")
    args = p.parse_args()
    if args.plot:
        if not args.out:
            p.error("--plot needs --out")
        plot(args.plot, args.out)
    elif args.combine:
        if not args.out:
            p.error("--combine needs --out")
        combine(args.combine[0], args.combine[1], args.out)
    else:
        if args.reps < 20:
            p.error("--reps must be >= 20")
        measure(args)


if __name__ == "__main__":
    main()
