#!/usr/bin/env python3
"""Ours and PyTorch SDPA's attention timed in turns, in one process, on the same buffers.

`camel bench attention` and `bench/torch_attention.py` run one after the other, so a GPU
that runs at another clock or temperature during the second run moves every ratio (the D = 128
forward measured 0.90-0.99x cuDNN in one such pair and 1.01-1.05x in another, with unchanged
code). This script removes that: it loads the library (libcamel.so, through ctypes), runs
cml_attention_fwd / cml_attention_bwd on the context's stream (cml_ctx_stream, wrapped as a
torch.cuda.ExternalStream, on which PyTorch's work runs too), and for every repetition times
ours, SDPA FLASH_ATTENTION (FlashAttention-2) and SDPA CUDNN_ATTENTION back to back, each after
the same untimed 2 GiB fill (L2 evicted; the GPU busy while Python issues the call). Medians
over --reps turns, after 3 warm-up turns.

Shapes as camel bench attention: bf16 [B, S, H, D] (SDPA sees the [B, H, S, D] view of the
same memory), B*S = --tokens, H = --hidden / D, uniform random values in [-sqrt 3, sqrt 3).
TFLOP/s: forward 4 B H S^2 D, halved when causal; fwd_bwd 3.5x that (DESIGN.md). Before
timing a shape, ours is checked against SDPA (norm-wise relative error of O below 2e-2), so
a wrong binding cannot produce a number.

    attention_side_by_side.py --lib build-gpu/src/libcamel.so [--d 128,256] [--s 2048,8192]
        [--causal both|yes|no] [--ops fwd,fwd_bwd] [--reps 20] [--json OUT.json]

The JSON is the combined results format of bench/torch_attention.py --combine (one record per
case, op and backend; ratio = ours / backend), so bench/plot_attention.py draws it.
"""
import argparse
import ctypes
import datetime
import json
import math
import statistics
import sys

from torch_attention import BACKENDS, D_ALL, S_ALL, causal_modes, int_list, op_flop, print_targets

CML_CUDA, CML_BF16 = 1, 2  # camel/runtime.h, camel/dtype.h


class Desc(ctypes.Structure):  # cml_attention_desc (camel/kernels.h)
    _fields_ = [("B", ctypes.c_int64), ("H_q", ctypes.c_int64), ("H_kv", ctypes.c_int64), ("S_q", ctypes.c_int64),
                ("S_kv", ctypes.c_int64), ("D", ctypes.c_int64), ("causal", ctypes.c_bool), ("scale", ctypes.c_float),
                ("dtype", ctypes.c_int), ("q_stride", ctypes.c_int64 * 3), ("k_stride", ctypes.c_int64 * 3),
                ("v_stride", ctypes.c_int64 * 3), ("o_stride", ctypes.c_int64 * 3),
                ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_kv", ctypes.c_void_p),
                ("total_q", ctypes.c_int64), ("total_kv", ctypes.c_int64)]


class Device(ctypes.Structure):  # cml_device
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int)]


class Camel:
    """The few entry points this script needs, and a context on cuda:0."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        lib.cml_last_error.restype = ctypes.c_char_p
        lib.cml_ctx_create.argtypes = [ctypes.POINTER(ctypes.c_void_p), Device]
        lib.cml_ctx_stream.restype = ctypes.c_void_p
        lib.cml_ctx_stream.argtypes = [ctypes.c_void_p]
        lib.cml_attention_desc_bshd.restype = Desc
        lib.cml_attention_desc_bshd.argtypes = [ctypes.c_int64] * 6 + [ctypes.c_bool, ctypes.c_int]
        vp = ctypes.c_void_p
        lib.cml_attention_fwd.argtypes = [vp, ctypes.POINTER(Desc)] + [vp] * 5
        lib.cml_attention_bwd.argtypes = [vp, ctypes.POINTER(Desc)] + [vp] * 9
        self.lib = lib
        self.ctx = ctypes.c_void_p()
        self.check(lib.cml_ctx_create(ctypes.byref(self.ctx), Device(CML_CUDA, 0)), "cml_ctx_create")
        self.stream = lib.cml_ctx_stream(self.ctx)

    def check(self, status, what):
        if status != 0:
            sys.exit(f"attention_side_by_side.py: {what} failed: {self.lib.cml_last_error().decode()}")

    def fwd(self, desc, o, lse, q, k, v):
        self.check(self.lib.cml_attention_fwd(self.ctx, ctypes.byref(desc), o.data_ptr(), lse.data_ptr(),
                                              q.data_ptr(), k.data_ptr(), v.data_ptr()), "cml_attention_fwd")

    def bwd(self, desc, dq, dk, dv, do, q, k, v, o, lse):
        self.check(self.lib.cml_attention_bwd(self.ctx, ctypes.byref(desc), *(t.data_ptr() for t in
                                                                             (dq, dk, dv, do, q, k, v, o, lse))),
                   "cml_attention_bwd")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libcamel.so of a CUDA build (e.g. build-gpu/src/libcamel.so)")
    ap.add_argument("--d", type=int_list, default=D_ALL)
    ap.add_argument("--s", type=int_list, default=S_ALL)
    ap.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    ap.add_argument("--ops", default="fwd,fwd_bwd", help="fwd, fwd_bwd or both (comma-separated)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--flush-bytes", type=int, default=2 << 30)
    ap.add_argument("--json")
    ap.add_argument("--commit", default="", help="recorded in the JSON's meta")
    args = ap.parse_args()
    ops = args.ops.split(",")
    if not ops or any(op not in ("fwd", "fwd_bwd") for op in ops):
        sys.exit(f"attention_side_by_side.py: --ops takes fwd and/or fwd_bwd, got {args.ops!r}")

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    camel = Camel(args.lib)
    stream = torch.cuda.ExternalStream(camel.stream)
    backend_enum = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    dev = torch.device("cuda")
    torch.manual_seed(0)
    sqrt3 = math.sqrt(3.0)
    results = []
    print(f"PyTorch {torch.__version__} (cuDNN {torch.backends.cudnn.version()}) on {torch.cuda.get_device_name(0)}; "
          f"ours from {args.lib}; in turns, median of {args.reps}, {args.flush_bytes >> 20} MiB fill before each call")
    print(f"{'op':<7} {'D':>4} {'S':>6} {'causal':<6} {'ours TF/s':>9} {'FA2':>7} {'cuDNN':>7} {'/FA2':>6} {'/cuDNN':>7}")
    with torch.cuda.stream(stream):
        flush = torch.empty(args.flush_bytes, dtype=torch.uint8, device=dev)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for D in args.d:
            for S in args.s:
                B, H = args.tokens // S, args.hidden // D

                def rand():
                    return torch.empty(B, S, H, D, device=dev, dtype=torch.bfloat16).uniform_(-sqrt3, sqrt3)

                q, k, v, do = (rand() for _ in range(4))
                o, dq, dk, dv = (torch.empty_like(q) for _ in range(4))
                lse = torch.empty(B, H, S, device=dev, dtype=torch.float32)
                qt, kt, vt, dot = (t.transpose(1, 2) for t in (q, k, v, do))  # SDPA's [B, H, S, D] views
                for t in (qt, kt, vt):
                    t.requires_grad_(True)
                for causal in causal_modes(args.causal):
                    desc = camel.lib.cml_attention_desc_bshd(B, S, S, H, H, D, causal, CML_BF16)

                    def sdpa(backend):
                        with sdpa_kernel(backend_enum[backend]):
                            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

                    camel.fwd(desc, o, lse, q, k, v)
                    ref = sdpa("flash").detach().transpose(1, 2).float()
                    err = ((o.float() - ref).norm() / ref.norm()).item()
                    if not err < 2e-2:
                        sys.exit(f"attention_side_by_side.py: ours differs from SDPA at D={D} S={S} causal={causal}: "
                                 f"relative error {err:.3g}")
                    for op in ops:
                        def ours():
                            camel.fwd(desc, o, lse, q, k, v)
                            if op == "fwd_bwd":
                                camel.bwd(desc, dq, dk, dv, do, q, k, v, o, lse)

                        def theirs(backend):
                            out = sdpa(backend)
                            if op == "fwd_bwd":
                                torch.autograd.grad(out, (qt, kt, vt), dot)

                        runs = {"ours": ours, "flash": lambda: theirs("flash"), "cudnn": lambda: theirs("cudnn")}
                        times = {name: [] for name in runs}
                        for rep in range(3 + args.reps):
                            for name, fn in runs.items():
                                flush.fill_(rep & 0xFF)
                                start.record(stream)
                                fn()
                                stop.record(stream)
                                stop.synchronize()
                                if rep >= 3:
                                    times[name].append(start.elapsed_time(stop))
                        flop = op_flop(op, B, S, H, D, causal)
                        tf = {name: flop / (statistics.median(t) * 1e-3) / 1e12 for name, t in times.items()}
                        print(f"{op:<7} {D:>4} {S:>6} {'yes' if causal else 'no':<6} {tf['ours']:9.1f} "
                              f"{tf['flash']:7.1f} {tf['cudnn']:7.1f} {tf['ours'] / tf['flash']:6.3f} "
                              f"{tf['ours'] / tf['cudnn']:7.3f}", flush=True)
                        for b in BACKENDS:
                            results.append({
                                "family": "attention", "op": op, "dtype": "bf16", "layout": "bshd",
                                "shape": {"B": B, "S": S, "H": H, "D": D, "causal": causal}, "flop": flop,
                                "ours": tf["ours"], "reference": tf[b], "ratio": tf["ours"] / tf[b],
                                "ref_name": BACKENDS[b] + " " + torch.__version__, "ref_backend": b,
                                "unit": "TFLOP/s", "ours_ms": statistics.median(times["ours"]),
                                "reference_ms": statistics.median(times[b]), "ours_ms_min": min(times["ours"]),
                                "reference_ms_min": min(times[b]), "reps": args.reps, "reference_reps": args.reps,
                                "method": "in turns, one process, same buffers"})
                del q, k, v, do, o, dq, dk, dv, lse, qt, kt, vt, dot
                torch.cuda.empty_cache()
    print()
    print_targets(results)
    if args.json:
        meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "command": " ".join(sys.argv), "reps": args.reps, "warmup": 3, "flush_bytes": args.flush_bytes,
                "tokens": args.tokens, "hidden": args.hidden, "commit": args.commit,
                "method": "ours and SDPA in turns, one process, same buffers",
                "reference": {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
