#!/usr/bin/env python3
"""PyTorch reference numbers for `camel bench membound` (apps/camel/cmd_bench_membound.c).

Same shapes, same bytes-that-must-move counts and the same two measurements
(see `camel bench membound --help`), with the 1 GiB device-to-device copy
measured the same way in the same process:
  steady: back-to-back calls over K rotating sets of inputs (K = ceil(2 L2 /
      bytes moved), so no call finds its data in L2); the outputs of the last K
      calls are kept alive, so the caching allocator rotates the output buffers
      too; each timed batch of N calls is queued behind untimed 256 MB fills
      that keep the GPU busy for longer than Python needs to queue the batch,
      so host overhead leaves no gaps; ms = the batch's time / N (CUDA events),
      median of --batches batches;
  cold: random inputs, 3 warm-ups, the median of --reps timed calls, each
      after an untimed fill of a 256 MB buffer so that L2 holds none of its data.

  torch_membound.py [--mode steady|cold|both] [--reps N] [--batches N] [--json PATH] [--quick] [--ops a,b,...]
      measures PyTorch and prints a table;
  torch_membound.py --combine OURS.json TORCH.json --out COMBINED.json
      joins camel bench membound's JSON with this script's into DESIGN.md's results
      format (reference = PyTorch, ratio = ours / PyTorch; plus the fractions of the
      1 GiB copy and of the copy of the same byte count, and the cold numbers) and
      prints a markdown table (docs/PERFORMANCE.md);
  torch_membound.py --plot COMBINED.json --out CHART.png
      draws the fraction of the copy bandwidth, ours and PyTorch's, per op and
      shape (needs matplotlib).
"""
import argparse
import collections
import datetime
import json
import math
import statistics
import sys
import time

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
        "cross_entropy": rc + 20 * r,          # logits, targets (i64), loss, lse (2 f32: ours saves it)
        "cross_entropy_bwd": 2 * rc + 20 * r,  # logits, dlogits, targets, dloss, lse
        "convert_scaled_e4m3": rc + n + 4,
        "convert_scaled_e4m3_amax": rc + n + 8,
    }[op]


BATCH_MS = 1.0  # steady: GPU time of one timed batch, roughly (as in cmd_bench_membound.c)
MAX_CALLS = 400
MAX_FILLS = 400


def measure(args):
    import torch
    import torch.nn.functional as F

    dev = torch.device("cuda")
    modes = {"both": ("steady", "cold"), "steady": ("steady",), "cold": ("cold",)}[args.mode]
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20) or (50 << 20)
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=dev)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(2):
        flush.fill_(0)
    start.record()
    for i in range(8):
        flush.fill_(i)
    stop.record()
    stop.synchronize()
    fill_ms = max(start.elapsed_time(stop) / 8, 0.01)

    def cold_ms(fn):
        """fn(s) runs the call on input set s; cold uses set 0."""
        for _ in range(3):
            fn(0)
        times = []
        for i in range(args.reps):
            flush.fill_(i & 0xFF)
            start.record()
            fn(0)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        return statistics.median(times)

    def steady_ms(fn, sets, est_ms):
        keep = collections.deque(maxlen=sets)  # outputs stay alive: the allocator rotates them
        for s in range(sets):
            keep.append(fn(s))
        torch.cuda.synchronize()
        probe = max(sets, 4)
        t0 = time.perf_counter()
        for i in range(probe):
            keep.append(fn(i % sets))
        host_ms = (time.perf_counter() - t0) * 1e3 / probe
        torch.cuda.synchronize()
        calls = max(math.ceil(BATCH_MS / max(est_ms, 1e-4)), 2 * sets)
        calls = min(math.ceil(calls / sets) * sets, MAX_CALLS)
        times = []
        for _ in range(args.batches):
            for i in range(min(MAX_FILLS, max(1, math.ceil((1.5 * calls * host_ms + 0.05) / fill_ms)))):
                flush.fill_(i & 0xFF)
            start.record()
            for i in range(calls):
                keep.append(fn(i % sets))
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / calls)
        keep.clear()
        return statistics.median(times), sets, calls

    def n_sets(nbytes):
        return max(1, math.ceil(2 * l2 / nbytes))

    wanted = set(args.ops.split(",")) if args.ops else set(OPS)
    unknown = wanted - set(OPS)
    if unknown:
        sys.exit(f"torch_membound.py: unknown ops {sorted(unknown)}; the ops are {', '.join(OPS)}")
    s_dev = torch.tensor(FP8_SCALE, device=dev)  # a device-side scale, like ours
    src = torch.rand(FLAT, device=dev) * 6 - 3
    dst = torch.empty_like(src)
    copy = {}
    if "cold" in modes:
        copy["cold"] = 2 * src.numel() * 4 / (cold_ms(lambda s: dst.copy_(src)) * 1e-3) / 1e9
    if "steady" in modes:
        copy["steady"] = 2 * src.numel() * 4 / (steady_ms(lambda s: dst.copy_(src), 1, 0.7)[0] * 1e-3) / 1e9
    del dst
    primary = modes[0]
    print("copy D2D 1 GiB (read + write): " + ", ".join(f"{m} {copy[m]:.1f} GB/s" for m in modes) + "\n")
    print(f"{'op':<24} {'dtype':<5} {'rows x cols':<14} {'MiB':>5}" +
          "".join(f" | {m + ' ms':>9} {'GB/s':>7}" for m in modes))
    results = []

    def record(op, dtype_name, rows, cols, es, fn, sets_avail):
        """fn(s): the call on input set s (0 <= s < sets_avail)."""
        if op not in wanted:
            return
        nbytes = op_bytes(op, rows, cols, es)
        rec = {"op": op, "dtype": dtype_name, "shape": {"rows": rows, "cols": cols},
               "ref_name": REF_NAMES[op] if rows > 1 else "x.sum()"}
        line = f"{op:<24} {dtype_name:<5} {rows:>6}x{cols:<7} {nbytes / 2**20:5.0f}"
        if "cold" in modes:
            ms = cold_ms(fn)
            rec["cold_ms"], rec["cold_GBps"] = ms, nbytes / (ms * 1e-3) / 1e9
            line += f" | {ms:9.4f} {rec['cold_GBps']:7.1f}"
        if "steady" in modes:
            est = rec.get("cold_ms", nbytes / 2.5e12 * 1e3 + 0.01)
            ms, sets, calls = steady_ms(fn, min(n_sets(nbytes), sets_avail), est)
            rec["steady_ms"], rec["steady_GBps"] = ms, nbytes / (ms * 1e-3) / 1e9
            rec["sets"], rec["calls"] = sets, calls
            line += f" | {ms:9.4f} {rec['steady_GBps']:7.1f}"
        rec["mode"] = primary
        rec["ms"], rec["GBps"] = rec[primary + "_ms"], rec[primary + "_GBps"]
        results.append(rec)
        print(line, flush=True)

    shapes = SHAPES[:2] if args.quick else SHAPES
    for rows, cols in shapes:
        for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            es = 4 if dtype == torch.float32 else 2
            K = n_sets(rows * cols * es) if "steady" in modes else 1  # enough for the op moving the fewest bytes
            x = (torch.rand(K, rows, cols, device=dev) * 6 - 3).to(dtype)
            dy = (torch.rand(K, rows, cols, device=dev) * 2 - 1).to(dtype)
            w = (torch.rand(cols, device=dev) + 0.5).to(dtype)
            b = (torch.rand(cols, device=dev) - 0.5).to(dtype)
            t = torch.randint(0, cols, (K, rows), device=dev)
            with torch.no_grad():
                stats = [torch.ops.aten.native_layer_norm(x[k], [cols], w, b, 1e-5)[1:] for k in range(K)]
                record("sum", name, rows, cols, es, lambda k: x[k].sum(-1), K)
                record("softmax", name, rows, cols, es, lambda k: torch.softmax(x[k], -1), K)
                record("softmax_bwd", name, rows, cols, es,
                       lambda k: torch._softmax_backward_data(dy[k], x[k], -1, dtype), K)
                record("layernorm", name, rows, cols, es, lambda k: F.layer_norm(x[k], (cols,), w, b, 1e-5), K)
                record("layernorm_bwd", name, rows, cols, es,
                       lambda k: torch.ops.aten.native_layer_norm_backward(dy[k], x[k], [cols], stats[k][0],
                                                                           stats[k][1], w, b, [True, True, True]), K)
                record("rmsnorm", name, rows, cols, es, lambda k: F.rms_norm(x[k], (cols,), w, 1e-5), K)
                record("convert_scaled_e4m3", name, rows, cols, es, lambda k: (x[k] * s_dev).to(torch.float8_e4m3fn),
                       K)
                record("convert_scaled_e4m3_amax", name, rows, cols, es,
                       lambda k: ((x[k] * s_dev).to(torch.float8_e4m3fn), x[k].abs().amax()), K)
                record("cross_entropy", name, rows, cols, es, lambda k: F.cross_entropy(x[k], t[k], reduction="none"),
                       K)
            # backward through autograd: one graph per input set, only as many as the op's sets
            if "rmsnorm_bwd" in wanted:
                kb = min(K, n_sets(op_bytes("rmsnorm_bwd", rows, cols, es))) if "steady" in modes else 1
                wr = w.detach().requires_grad_()
                xr = [x[k].detach().requires_grad_() for k in range(kb)]
                yr = [F.rms_norm(xr[k], (cols,), wr, 1e-5) for k in range(kb)]
                record("rmsnorm_bwd", name, rows, cols, es,
                       lambda k: torch.autograd.grad(yr[k], (xr[k], wr), dy[k], retain_graph=True), kb)
                del xr, wr, yr
            if "cross_entropy_bwd" in wanted:
                kb = min(K, n_sets(op_bytes("cross_entropy_bwd", rows, cols, es))) if "steady" in modes else 1
                xg = [x[k].detach().requires_grad_() for k in range(kb)]
                loss = [F.cross_entropy(xg[k], t[k], reduction="none") for k in range(kb)]
                dloss = (torch.rand(kb, rows, device=dev) + 0.5).to(loss[0].dtype)
                record("cross_entropy_bwd", name, rows, cols, es,
                       lambda k: torch.autograd.grad(loss[k], xg[k], dloss[k], retain_graph=True), kb)
                del xg, loss, dloss
            del x, dy, w, b, t, stats
            torch.cuda.empty_cache()
    with torch.no_grad():
        record("sum", "f32", 1, FLAT, 4, lambda k: src.sum(), 1)
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": " ".join(sys.argv), "reps": args.reps, "batches": args.batches, "mode": primary,
            "copy_GBps": copy[primary], "copy_steady_GBps": copy.get("steady"), "copy_cold_GBps": copy.get("cold")}
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
    meta = dict(ours["meta"])
    mode = meta.get("mode", "cold")  # ours' primary numbers (older files: cold only)
    copy = meta["copy_GBps"]
    copy_cold = meta.get("copy_cold_GBps") or (copy if mode == "cold" else None)
    tmode = ref["meta"].get("mode", "cold")
    results = []

    def div(a, b):
        return a / b if a and b else None

    for r in ours["results"]:
        t = torch_by_key.get(key(r), {})
        t_primary = t.get(mode + "_GBps") or (t.get("GBps") if tmode == mode else None)
        cold_ours = r.get("cold_GBps") if mode != "cold" else r["ours"]
        rec = {"family": "membound", "op": r["op"], "dtype": r["dtype"], "shape": r["shape"], "bytes": r["bytes"],
               "mode": mode, "ours": r["ours"], "reference": t_primary,
               "ref_name": t.get("ref_name", "n/a") + " (PyTorch " + ref["meta"]["torch"] + ")",
               "unit": "GB/s", "ratio": div(r["ours"], t_primary), "ours_ms": r["ms"],
               "reference_ms": t.get(mode + "_ms"), "copy_GBps": copy, "copy_ratio": r["ours"] / copy,
               "copy_size_GBps": r.get("copy_size_GBps"), "size_ratio": div(r["ours"], r.get("copy_size_GBps")),
               "sets": r.get("sets"), "calls": r.get("calls")}
        if mode != "cold":
            rec["cold"] = {"ours": cold_ours, "reference": t.get("cold_GBps"),
                           "ratio": div(cold_ours, t.get("cold_GBps")),
                           "copy_ratio": div(cold_ours, copy_cold),
                           "size_ratio": div(cold_ours, r.get("cold_copy_size_GBps")),
                           "ours_ms": r.get("cold_ms"), "reference_ms": t.get("cold_ms")}
        results.append(rec)
    meta["reference"] = {"torch": ref["meta"]["torch"], "cuda": ref["meta"]["cuda"],
                         "copy_GBps": ref["meta"]["copy_GBps"], "command": ref["meta"]["command"],
                         "mode": tmode}
    with open(out_path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)

    def pct(v):
        return f"{100 * v:.0f}%" if v else "n/a"

    def gb(v):
        return f"{v:.0f}" if v else "n/a"

    def x(v):
        return f"{v:.2f}x" if v else "n/a"

    print(f"GPU {meta['gpu']}, 1 GiB copy {copy:.0f} GB/s ({mode}), torch's copy {ref['meta']['copy_GBps']:.0f} GB/s, "
          f"PyTorch {ref['meta']['torch']}\n")
    print(f"Primary numbers: {mode}. GB/s = bytes that must move / time; % copy = of the 1 GiB copy; "
          f"% size = of a copy of the same byte count, measured the same way.\n")
    cold_cols = mode != "cold"
    head = f"| op | dtype | rows x cols | MiB | {mode} GB/s | % copy | % size | torch GB/s | ours / torch |"
    rule = "|---|---|---|---:|---:|---:|---:|---:|---:|"
    if cold_cols:
        head += " cold GB/s | cold % copy | cold % size | cold torch GB/s | cold ours / torch |"
        rule += "---:|---:|---:|---:|---:|"
    print(head)
    print(rule)
    miss = {"copy": 0, "size": 0, "torch": 0, "cold_copy": 0, "cold_size": 0, "cold_torch": 0}
    for r in results:
        mib = r["bytes"] / 2**20
        line = (f"| {r['op']} | {r['dtype']} | {r['shape']['rows']} x {r['shape']['cols']} | {mib:.0f} | "
                f"{gb(r['ours'])} | {pct(r['copy_ratio'])} | {pct(r['size_ratio'])} | {gb(r['reference'])} | "
                f"{x(r['ratio'])} |")
        miss["copy"] += mib >= 16 and r["copy_ratio"] < 0.9
        miss["size"] += mib >= 16 and r["size_ratio"] is not None and r["size_ratio"] < 0.9
        miss["torch"] += r["ratio"] is not None and r["ratio"] < 1.0
        if cold_cols:
            c = r["cold"]
            line += (f" {gb(c['ours'])} | {pct(c['copy_ratio'])} | {pct(c['size_ratio'])} | {gb(c['reference'])} | "
                     f"{x(c['ratio'])} |")
            miss["cold_copy"] += mib >= 16 and c["copy_ratio"] is not None and c["copy_ratio"] < 0.9
            miss["cold_size"] += mib >= 16 and c["size_ratio"] is not None and c["size_ratio"] < 0.9
            miss["cold_torch"] += c["ratio"] is not None and c["ratio"] < 1.0
        print(line)
    print(f"\n{len(results)} results, {mode}: {miss['copy']} under 90% of the 1 GiB copy and {miss['size']} under 90% "
          f"of the same-size copy (of those moving >= 16 MiB), {miss['torch']} slower than PyTorch")
    if cold_cols:
        print(f"cold: {miss['cold_copy']} under 90% of the 1 GiB copy and {miss['cold_size']} under 90% of the "
              f"same-size copy (of those moving >= 16 MiB), {miss['cold_torch']} slower than PyTorch")


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
    fig.suptitle(f"memory-bound kernels on {data['meta']['gpu']}, {data['meta'].get('mode', 'cold')} "
                 f"(1 GiB copy {copy:.0f} GB/s = 100%, dashed: 90%)")
    fig.tight_layout()
    fig.savefig(out_path, dpi=90)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("both", "steady", "cold"), default="both")
    p.add_argument("--reps", type=int, default=30, help="cold: timed calls (median reported), >= 20")
    p.add_argument("--batches", type=int, default=7, help="steady: timed batches (median reported), 3..50")
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
        if not 3 <= args.batches <= 50:
            p.error("--batches must be in [3, 50]")
        measure(args)


if __name__ == "__main__":
    main()
