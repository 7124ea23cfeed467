#!/usr/bin/env python3
"""Draws the ratio chart (ours / cuBLAS or cuBLASLt, higher is better) of a
`camel bench gemm --json FILE` result as a PNG: one panel per input dtype, one
bar per case, labelled with its shape, coloured by set, a line at 1.0.

    python3 bench/plot_gemm.py bench/results/gemm_h100.json --out docs/gemm_h100.png
"""
import argparse
import json
import math
import sys

SET_COLOURS = {"square": "#4C72B0", "gpt2": "#DD8452", "odd": "#55A868", "batched": "#C44E52", "grouped": "#8172B3"}
DTYPE_ORDER = ["bf16", "fp16", "e4m3", "tf32", "f32"]


def label(r):
    s = r["shape"]
    ops = s.get("op_a", "N") + s.get("op_b", "N")
    core = f'{s["M"]}x{s["N"]}x{s["K"]}'
    if s.get("batch", 1) > 1:
        core = f'{s["batch"]}x' + core
    op = r.get("op", "gemm")
    tag = "" if op == "gemm" else " " + op.replace("gpt2_", "").replace("_as_one", " as one").replace("_same_flops", " same flops")
    return f"{core} {ops}{tag}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="results of camel bench gemm --json")
    ap.add_argument("--out", required=True, help="PNG to write")
    args = ap.parse_args()
    with open(args.json) as f:
        data = json.load(f)
    results = [r for r in data["results"] if r.get("family") == "gemm" and r.get("ratio") is not None]
    if not results:
        sys.exit(f"{args.json}: no gemm results with a ratio")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dtypes = [d for d in DTYPE_ORDER if any(r["dtype"] == d for r in results)]
    dtypes += sorted({r["dtype"] for r in results} - set(dtypes))
    rows = [[r for r in results if r["dtype"] == d] for d in dtypes]
    height = sum(0.22 * len(rs) + 0.9 for rs in rows)
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(10, max(3.0, height)), squeeze=False,
                             gridspec_kw={"height_ratios": [max(1, len(rs)) for rs in rows]})
    meta = data.get("meta", {})
    for ax, d, rs in zip(axes[:, 0], dtypes, rows):
        ratios = [r["ratio"] for r in rs]
        y = range(len(rs))
        ax.barh(list(y), ratios, color=[SET_COLOURS.get(r.get("set"), "#999999") for r in rs])
        ax.set_yticks(list(y))
        ax.set_yticklabels([label(r) for r in rs], fontsize=7)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", linewidth=0.8)
        geo = math.exp(sum(math.log(v) for v in ratios) / len(ratios))
        ax.set_title(f"{d}: ours / {rs[0].get('ref_name', 'reference')} (geomean {geo:.3f}x over {len(rs)} cases)",
                     fontsize=9, loc="left")
        ax.set_xlim(0, max(1.2, max(ratios) * 1.05))
        for i, v in enumerate(ratios):
            ax.text(v, i, f" {v:.2f}", va="center", fontsize=6)
    axes[-1, 0].set_xlabel("ratio of TFLOP/s (higher is better)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in SET_COLOURS.values()]
    fig.legend(handles, list(SET_COLOURS.keys()), loc="upper right", fontsize=7, ncol=5)
    fig.suptitle(f"camel bench gemm on {meta.get('gpu', '?')} (commit {meta.get('commit', '?')}, {meta.get('date', '?')})",
                 fontsize=9, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
