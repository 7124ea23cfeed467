#!/usr/bin/env python3
"""The backward ladder's table: `camel bench attention --json OURS` against the PyTorch SDPA cuDNN
numbers of bench/results/attention_h100.json (same H100; fwd and fwd_bwd records).

bwd TFLOP/s = 2.5 x fwd flops / (fwd_bwd ms - fwd ms), both medians of the same run; fwd+bwd as
the bench reports it (3.5 x fwd flops over the fwd_bwd median).
    python3 dev/attention_sm90/bwd_table.py OURS.json [REF.json]
"""
import json
import sys


def load(path):
    out = {}
    for r in json.load(open(path))["results"]:
        s = r["shape"]
        key = (s["D"], s["S"], bool(s["causal"]))
        out.setdefault(key, {})
        if r.get("ref_backend", "cudnn") != "cudnn" and "ref_backend" in r:
            continue
        out[key][r["op"]] = r
    return out


def main():
    ours = load(sys.argv[1])
    ref = load(sys.argv[2] if len(sys.argv) > 2 else "bench/results/attention_h100.json")
    print("D   S      causal | fwd ms  fwd+bwd ms  bwd ms | bwd TF  fwd+bwd TF | cuDNN bwd TF  fwd+bwd TF | ratio fwd+bwd")
    for key in sorted(ours):
        o = ours[key]
        if "fwd" not in o or "fwd_bwd" not in o or o["fwd"].get("ours_ms") is None:
            continue
        f_ms, fb_ms = o["fwd"]["ours_ms"], o["fwd_bwd"]["ours_ms"]
        flop = o["fwd"]["flop"]
        b_ms = fb_ms - f_ms
        bwd_tf = 2.5 * flop / b_ms / 1e9
        fb_tf = 3.5 * flop / fb_ms / 1e9
        r = ref.get(key, {})
        rb = rfb = None
        if "fwd" in r and "fwd_bwd" in r and r["fwd"].get("reference_ms"):
            rf_ms, rfb_ms = r["fwd"]["reference_ms"], r["fwd_bwd"]["reference_ms"]
            rb = 2.5 * flop / (rfb_ms - rf_ms) / 1e9
            rfb = 3.5 * flop / rfb_ms / 1e9
        print("%-3d %-6d %-6s | %6.3f  %10.3f  %6.3f | %6.1f  %10.1f | %12s  %10s | %s" % (
            key[0], key[1], "yes" if key[2] else "no", f_ms, fb_ms, b_ms, bwd_tf, fb_tf,
            "%.1f" % rb if rb else "-", "%.1f" % rfb if rfb else "-", "%.2f" % (fb_tf / rfb) if rfb else "-"))


if __name__ == "__main__":
    main()
