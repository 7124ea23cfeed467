#!/usr/bin/env python3
"""Draws the attention chart of a combined result (bench/torch_attention.py --combine)
as a PNG: TFLOP/s against the sequence length S, one panel per head dim D (columns)
and per op and masking (rows: forward and forward+backward, each non-causal and
causal), lines for ours, PyTorch SDPA FlashAttention-2 and PyTorch SDPA cuDNN.

    python3 bench/plot_attention.py bench/results/attention_h100.json --out docs/attention_h100.png
"""
import argparse
import json
import sys

LINES = [("ours", "ours", "#C44E52", "o"), ("flash", "FA2 (SDPA flash)", "#4C72B0", "s"),
         ("cudnn", "cuDNN (SDPA)", "#55A868", "^")]
OPS = [("fwd", "forward"), ("fwd_bwd", "forward+backward")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="the output of torch_attention.py --combine")
    ap.add_argument("--out", required=True, help="PNG to write")
    args = ap.parse_args()
    with open(args.json) as f:
        data = json.load(f)
    results = [r for r in data["results"] if r.get("family") == "attention" and r.get("op") in dict(OPS)]
    if not results:
        sys.exit(f"{args.json}: no attention fwd / fwd_bwd results")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ds = sorted({r["shape"]["D"] for r in results})
    panels = [(op, causal) for op, _ in OPS for causal in (False, True)
              if any(r["op"] == op and bool(r["shape"]["causal"]) == causal for r in results)]
    fig, axes = plt.subplots(len(panels), len(ds), figsize=(4.2 * len(ds), 2.9 * len(panels)), squeeze=False,
                             sharex=True)
    top = max([r["ours"] or 0 for r in results] + [r["reference"] or 0 for r in results]) * 1.08
    for row, (op, causal) in enumerate(panels):
        for col, d in enumerate(ds):
            ax = axes[row, col]
            rs = [r for r in results if r["op"] == op and bool(r["shape"]["causal"]) == causal and r["shape"]["D"] == d]
            for name, label, colour, marker in LINES:
                pts = {}
                for r in rs:  # ours appears once per backend record: the same value
                    v = r["ours"] if name == "ours" else (r["reference"] if r.get("ref_backend") == name else None)
                    if v:
                        pts[r["shape"]["S"]] = v
                if pts:
                    xs = sorted(pts)
                    ax.plot(xs, [pts[x] for x in xs], marker=marker, color=colour, label=label, linewidth=1.4,
                            markersize=4)
            ax.set_xscale("log", base=2)
            ax.set_ylim(0, top)
            ax.grid(True, linewidth=0.4, alpha=0.5)
            ax.set_title(f"{dict(OPS)[op]}, {'causal' if causal else 'non-causal'}, D={d}", fontsize=9)
            if col == 0:
                ax.set_ylabel("TFLOP/s")
            if row == len(panels) - 1:
                ax.set_xlabel("sequence length S (B*S fixed)")
                sizes = sorted({r["shape"]["S"] for r in results})
                ax.set_xticks(sizes)
                ax.set_xticklabels([f"{s // 1024}k" if s >= 1024 else str(s) for s in sizes], fontsize=7)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", fontsize=8, ncol=3)
    meta = data.get("meta", {})
    ref = meta.get("reference", {})
    fig.suptitle(f"attention bf16 on {meta.get('gpu', '?')}: B*S = {meta.get('tokens', '?')}, hidden "
                 f"{meta.get('hidden', '?')} (commit {meta.get('commit', '?')}, PyTorch {ref.get('torch', '?')})",
                 fontsize=9, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
