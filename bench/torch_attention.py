#!/usr/bin/env python3
"""PyTorch reference numbers for `camel bench attention` (apps/camel/cmd_bench_attention.c).

torch.nn.functional.scaled_dot_product_attention under
torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION) (FlashAttention-2)
and under SDPBackend.CUDNN_ATTENTION, on the same shapes as ours: bf16
[B, S, H, D] tensors (viewed as [B, H, S, D], as SDPA wants, without a copy)
of random values uniform in [-sqrt 3, sqrt 3), B * S = --tokens (16384),
H = --hidden / D (2048 / D), D in --d, S in --s, causal and not. Timed:
  fwd      out = sdpa(q, k, v) with inputs that require grad (as in training:
           the backward's statistics are kept)
  fwd_bwd  that, then torch.autograd.grad(out, (q, k, v), dO)
TFLOP/s with the same counts as ours: forward 4 B H S^2 D, halved when causal;
fwd_bwd 3.5x that. Method (bench/torch_timing.py): 3 warm-ups, the median of
--reps calls with CUDA events, each after an untimed fill of a 2 GiB buffer
(evicts L2 and covers Python's launch latency: with 1 GiB, cuDNN's D=256
S=2048 forward had a median 1.28x its minimum on an H100). A backend that refuses a
shape is recorded as skipped with its message.

  torch_attention.py [--reps N] [--json PATH] [--quick] [--d 64,128] [--s 512,2048] [--causal both|yes|no]
  torch_attention.py --combine OURS.json TORCH.json --out COMBINED.json
      joins camel bench attention's JSON with this script's into DESIGN.md's results
      format: one record per case, op and PyTorch backend (reference = that backend,
      ratio = ours / it), and prints a markdown table (ours, FA2, cuDNN TF/s and the
      ratios) and how many points meet issue 6's targets.
bench/plot_attention.py draws the combined file.
"""
import argparse
import datetime
import json
import math
import statistics
import sys
import warnings

D_ALL = [64, 128, 256]
S_ALL = [512, 1024, 2048, 4096, 8192, 16384]
S_QUICK = [512, 2048]  # as camel bench attention --quick
BACKENDS = {"flash": "PyTorch SDPA FLASH_ATTENTION (FlashAttention-2)", "cudnn": "PyTorch SDPA CUDNN_ATTENTION"}
OPS = ["fwd", "fwd_bwd"]


def fwd_flop(B, S, H, D, causal):
    return 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)


def op_flop(op, B, S, H, D, causal):
    return fwd_flop(B, S, H, D, causal) * (3.5 if op == "fwd_bwd" else 1.0)


def int_list(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}")
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def causal_modes(text):
    return {"both": [False, True], "yes": [True], "no": [False]}[text]


def measure(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from torch_timing import Timer

    dev = torch.device("cuda")
    torch.manual_seed(0)
    timer = Timer(flush_bytes=args.flush_bytes)
    backend_enum = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    backends = args.backends.split(",")
    for b in backends:
        if b not in BACKENDS:
            sys.exit(f"torch_attention.py: unknown backend {b!r}; the backends are {', '.join(BACKENDS)}")
    ds = args.d or D_ALL
    ss = args.s or (S_QUICK if args.quick else S_ALL)
    for S in ss:
        if args.tokens % S:
            sys.exit(f"torch_attention.py: S={S} does not divide --tokens={args.tokens}")
    for D in ds:
        if args.hidden % D:
            sys.exit(f"torch_attention.py: D={D} does not divide --hidden={args.hidden}")
    print(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}) on "
          f"{torch.cuda.get_device_name(0)}: bf16 [B,S,H,D], B*S = {args.tokens}, hidden {args.hidden}, median of "
          f"{args.reps} calls, L2 flushed before each\n")
    print(f"{'backend':<7} {'D':>4} {'S':>6} {'B':>3} {'H':>3} {'causal':<6} {'fwd ms':>9} {'fwd TF/s':>9} "
          f"{'f+b ms':>9} {'f+b TF/s':>9}")
    results = []
    sqrt3 = math.sqrt(3.0)
    for D in ds:
        for S in ss:
            B, H = args.tokens // S, args.hidden // D

            def rand():
                x = torch.empty(B, S, H, D, device=dev, dtype=torch.bfloat16).uniform_(-sqrt3, sqrt3)
                return x.transpose(1, 2)  # [B, H, S, D] view of [B, S, H, D] memory, as ours

            q, k, v, do = (rand() for _ in range(4))
            for t in (q, k, v):
                t.requires_grad_(True)
            for causal in causal_modes(args.causal):
                for backend in backends:
                    cells = []
                    for op in OPS:
                        def fwd():
                            with sdpa_kernel(backend_enum[backend]):
                                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                        def fwd_bwd():
                            out = fwd()
                            return torch.autograd.grad(out, (q, k, v), do)

                        fn = fwd if op == "fwd" else fwd_bwd
                        flop = op_flop(op, B, S, H, D, causal)
                        rec = {"op": op, "backend": backend, "dtype": "bf16", "layout": "bshd",
                               "shape": {"B": B, "S": S, "H": H, "D": D, "causal": causal}, "flop": flop,
                               "ref_name": BACKENDS[backend] + " " + torch.__version__}
                        try:
                            with warnings.catch_warnings(record=True) as caught:
                                warnings.simplefilter("always")
                                fn()  # a backend that cannot take the shape raises here
                            torch.cuda.synchronize()
                        except (RuntimeError, NotImplementedError, ValueError) as e:
                            why = " ".join(str(e).split())
                            reasons = " ".join(" ".join(str(w.message).split()) for w in caught)
                            rec["skipped"] = (why + (" (warnings: " + reasons + ")" if reasons else ""))[:400]
                            results.append(rec)
                            cells.append(rec)
                            continue
                        times = timer.times_ms(fn, args.reps)
                        ms = statistics.median(times)
                        rec.update({"ms": ms, "ms_min": min(times), "tflops": flop / (ms * 1e-3) / 1e12,
                                    "reps": args.reps})
                        results.append(rec)
                        cells.append(rec)
                    row = f"{backend:<7} {D:>4} {S:>6} {B:>3} {H:>3} {'yes' if causal else 'no':<6}"
                    for c in cells:
                        row += f" {c['ms']:9.3f} {c['tflops']:9.1f}" if "tflops" in c else f" {'skipped':>9} {'':>9}"
                    print(row, flush=True)
                    for c in cells:
                        if "skipped" in c:
                            print(f"      {c['op']} skipped: {c['skipped'][:300]}")
            del q, k, v, do
            torch.cuda.empty_cache()
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": " ".join(sys.argv), "reps": args.reps, "warmup": timer.warmup,
            "flush_bytes": args.flush_bytes, "tokens": args.tokens, "hidden": args.hidden}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
        print(f"wrote {args.json}")


def key(r):
    s = r["shape"]
    return (r["op"], s["B"], s["S"], s["H"], s["D"], bool(s["causal"]))


TARGETS = (  # issue 6: (text, op, which points, backend, bound)
    ("forward >= 1.0x cuDNN at D in {128, 256}, S >= 2048", "fwd", lambda s: s["D"] in (128, 256) and s["S"] >= 2048,
     "cudnn", 1.0),
    ("forward >= 1.5x FA2 everywhere", "fwd", lambda s: True, "flash", 1.5),
    ("fwd+bwd >= 1.0x cuDNN at S >= 2048", "fwd_bwd", lambda s: s["S"] >= 2048, "cudnn", 1.0))


def print_targets(results):
    """How many points of combined records (ours vs one backend each) meet each target: every point
    the backend measured counts, and one that ours did not measure is a miss."""
    for text, op, pred, backend, bound in TARGETS:
        pts = [r for r in results if r["op"] == op and r["ref_backend"] == backend and pred(r["shape"])
               and r.get("reference")]
        if pts:
            k = sum(1 for r in pts if r.get("ratio") is not None and r["ratio"] >= bound)
            print(f"target: {text}: {k} of {len(pts)} points" + (" (met)" if k == len(pts) else ""))


def combine(ours_path, torch_path, out_path):
    with open(ours_path) as f:
        ours = json.load(f)
    with open(torch_path) as f:
        ref = json.load(f)
    by_key = {(key(r), r["backend"]): r for r in ref["results"]}
    results = []
    rows = []  # (ours record, {backend: torch record or None})
    for r in ours["results"]:
        if r.get("family") != "attention" or r.get("op") not in OPS:
            continue
        refs = {b: by_key.get((key(r), b)) for b in BACKENDS}
        rows.append((r, refs))
        for b, t in refs.items():
            ok = t is not None and "tflops" in t
            rec = {"family": "attention", "op": r["op"], "dtype": r["dtype"], "layout": r.get("layout", "bshd"),
                   "shape": r["shape"], "flop": r["flop"], "ours": r.get("ours"),
                   "reference": t["tflops"] if ok else None,
                   "ref_name": t["ref_name"] if t else BACKENDS[b] + " (not measured)", "ref_backend": b,
                   "unit": "TFLOP/s",
                   "ratio": r["ours"] / t["tflops"] if ok and r.get("ours") else None,
                   "ours_ms": r.get("ours_ms"), "reference_ms": t["ms"] if ok else None,
                   "ours_ms_min": r.get("ours_ms_min"), "reference_ms_min": t.get("ms_min") if ok else None,
                   "reps": r.get("reps"), "reference_reps": t.get("reps") if ok else None}
            for field in ("skipped", "error"):
                if r.get(field):
                    rec["ours_" + field] = r[field]
            if t and t.get("skipped"):
                rec["reference_skipped"] = t["skipped"]
            results.append(rec)
    meta = dict(ours["meta"])
    meta["reference"] = {k: ref["meta"].get(k) for k in ("torch", "cuda", "cudnn", "gpu", "command", "reps", "date")}
    with open(out_path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)

    def tf(v):
        return f"{v:.0f}" if v else "n/a"

    def ratio(a, b):
        return f"{a / b:.2f}x" if a and b else "n/a"

    print(f"GPU {meta['gpu']}, commit {meta.get('commit', '?')}; PyTorch {ref['meta']['torch']} "
          f"(cuDNN {ref['meta'].get('cudnn')}); bf16 [B,S,H,D], B*S = {meta.get('tokens')}, hidden "
          f"{meta.get('hidden')}; TFLOP/s, forward 4BHS^2D (x0.5 causal), fwd+bwd 3.5x\n")
    print("| op | D | S | B x H | causal | ours TF/s | FA2 TF/s | cuDNN TF/s | ours / FA2 | ours / cuDNN |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for r, refs in rows:
        s = r["shape"]
        fa = refs["flash"]["tflops"] if refs["flash"] and "tflops" in refs["flash"] else None
        cu = refs["cudnn"]["tflops"] if refs["cudnn"] and "tflops" in refs["cudnn"] else None
        o = r.get("ours")
        ours_cell = tf(o) if o else ("skipped" if r.get("skipped") else "FAILED" if r.get("error") else "n/a")
        print(f"| {r['op'].replace('_', '+')} | {s['D']} | {s['S']} | {s['B']} x {s['H']} | "
              f"{'yes' if s['causal'] else 'no'} | {ours_cell} | {tf(fa)} | {tf(cu)} | {ratio(o, fa)} | "
              f"{ratio(o, cu)} |")

    print()
    print_targets(results)
    skipped = [r for r, _ in rows if r.get("skipped")]
    if skipped:
        print(f"{len(skipped)} of our measurements skipped (the library rejects them; see the JSON's ours_skipped)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=20, help="timed calls per case (median reported)")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--quick", action="store_true", help="S in {512, 2048} only (unless --s is given)")
    p.add_argument("--d", type=int_list, help="head dims (default 64,128,256)")
    p.add_argument("--s", type=int_list, help="sequence lengths (default 512,...,16384)")
    p.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    p.add_argument("--backends", default="flash,cudnn", help="comma-separated: flash, cudnn")
    p.add_argument("--tokens", type=int, default=16384, help="B * S")
    p.add_argument("--hidden", type=int, default=2048, help="H * D")
    p.add_argument("--flush-bytes", type=int, default=2 << 30, help="the untimed fill before each timed call")
    p.add_argument("--combine", nargs=2, metavar=("OURS", "TORCH"))
    p.add_argument("--out")
    args = p.parse_args()
    if args.combine:
        if not args.out:
            p.error("--combine needs --out")
        combine(args.combine[0], args.combine[1], args.out)
    else:
        if args.reps < 1:
            p.error("--reps must be >= 1")
        measure(args)


if __name__ == "__main__":
    main()
