#!/usr/bin/env python3
"""Session 9 study (README "Plan (session 9 study): the causal forward order without C7511"): the forward's
O and lse of one library as hashes, to compare two builds bit for bit (run_s10f.sh).

    ohash.py --lib build/src/libcamel.so > hashes.txt

For each shape (bf16 BSHD; causal and full; awkward S, S_q != S_kv both ways, GQA, head counts that leave
a partial last head group of the causal order): fixed-seed Q / K / V, O and lse poisoned (0xFF bytes:
NaN) before each call, two calls whose bytes must be equal ("repeat ok"), the count of NaN left in O
(must be 0: every row written) and a SHA-256 of O and of lse. A work order that dropped, repeated or
mis-mapped a tile, or a half tile that let a key through, changes a hash or leaves NaN: the lines of
two builds that compute the same tiles the same way are equal line for line.
"""
import argparse
import hashlib
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from attention_side_by_side import CML_BF16, Camel  # noqa: E402

# (B, S_q, S_kv, H_q, H_kv, D, causal)
SHAPES = [
    (8, 2048, 2048, 32, 32, 64, True), (8, 2048, 2048, 32, 32, 64, False),
    (4, 2048, 2048, 16, 16, 128, True), (4, 2048, 2048, 16, 16, 128, False),
    (1, 8192, 8192, 32, 32, 64, True),    # head_group 8 of 32 pairs
    (1, 8192, 8192, 12, 12, 64, True),    # groups of 8 and 4 (a partial last group)
    (1, 16384, 16384, 3, 3, 128, True),   # groups of 2 and 1
    (2, 4097, 4097, 8, 8, 64, True), (2, 4097, 4097, 8, 8, 128, False),
    (3, 1000, 1500, 8, 2, 128, True),     # S_q < S_kv, GQA
    (2, 1500, 1000, 8, 8, 64, True),      # S_q > S_kv (rows without keys)
    (3, 777, 777, 5, 5, 64, True), (1, 2080, 2080, 4, 4, 128, False),
    (2, 1000, 1064, 8, 8, 64, True),      # S_kv - S_q = 64: the 128-row tiles ran extra masked key tiles
    (1, 8192, 8192, 8, 8, 256, True),     # D = 256 causal: head groups (session 11's order patch)
    (2, 2047, 2047, 5, 5, 256, True), (2, 2048, 2048, 8, 8, 256, False),
    (3, 1000, 1500, 8, 2, 256, True),     # D = 256, S_q < S_kv, GQA
]

# --short (session 12, helper h12e: run_s13_short.sh): the short causal shapes whose path the s13_short patch's
# switches change -- D = 256 causal S_kv <= 1024 (the persistent kernel, O from registers) and D = 64 causal with
# S_q % 64 == 0, S_q % 192 != 0 (end-aligned query tiles) -- with odd sizes, S_q != S_kv both ways, GQA, fewer
# tiles than SMs, and controls (full, S_q % 192 == 0). Every line must equal the base library's.
SHORT = [
    (32, 512, 512, 8, 8, 256, True), (16, 1024, 1024, 8, 8, 256, True),   # the benchmark's S = 512 / 1k
    (2, 1000, 1000, 5, 5, 256, True), (3, 700, 1000, 8, 2, 256, True),   # partial tile; S_q < S_kv, GQA
    (2, 1000, 600, 4, 4, 256, True), (1, 77, 77, 3, 3, 256, True),       # rows without keys; 3 tiles only
    (2, 512, 512, 8, 8, 256, False),                                      # full: the one-tile kernel as before
    (16, 1024, 1024, 32, 32, 64, True), (32, 512, 512, 32, 32, 64, True), # S_q % 192 = 64 / 128
    (2, 960, 960, 4, 4, 64, True), (3, 1088, 1088, 5, 5, 64, True),      # 960 = 5 x 192 (no shift); 1088
    (2, 640, 1000, 8, 2, 64, True), (2, 1024, 704, 8, 8, 64, True),      # S_q < S_kv GQA; S_q > S_kv
    (1, 128, 128, 2, 2, 64, True), (2, 1024, 1024, 8, 8, 64, False),     # one tile; full (unchanged)
]

# --qshift (session 12, helper h12g: run_s13_qshift.sh): the long causal D = 64 shapes whose query tiles the
# QSHIFT rule aligns to the sequence end by default (S_q % 192 == 64: 4k, 16k; S_kv > S_q with GQA; S_q > S_kv)
# and, with CML_ATT_FWD_QSHIFT=1, by 64 rows (S_q % 192 == 128: 2k, 8k); full 4k as a control.
QSHIFT = [
    (4, 4096, 4096, 16, 16, 64, True), (1, 16384, 16384, 8, 8, 64, True),   # the benchmark's 4k / 16k (fewer heads)
    (2, 4096, 4500, 8, 2, 64, True), (2, 4096, 3000, 4, 4, 64, True),      # S_q < S_kv GQA; S_q > S_kv
    (2, 2048, 2048, 8, 8, 64, True), (1, 8192, 8192, 4, 4, 64, True),      # S_q % 192 == 128 (shifted with =1)
    (2, 4096, 4096, 8, 8, 64, False),                                       # full: never shifted
]

# --d256s (session 13, helper h13a: run_s13_d256s.sh): causal D = 256 shapes for the NARROW kernel (64-row query
# tiles, two CTAs an SM; taken for S_kv <= 1024 by default, CML_ATT_FWD_D256S sets the limit): the benchmark's
# 512 / 1k / 2k (2k only with a limit >= 2048), odd sizes, S_q != S_kv both ways, GQA / MQA, an odd number of query
# tiles, one row; controls that keep the 128-row kernel (S_kv 1025 past the default limit, full attention). Its O / lse
# differ from the 128-row kernel's in the last bits (other key tiles: another summation order); every control line
# must equal the base library's.
D256S = [
    (32, 512, 512, 8, 8, 256, True), (16, 1024, 1024, 8, 8, 256, True),   # the benchmark's S = 512 / 1k
    (8, 2048, 2048, 8, 8, 256, True),                                      # 2k: NARROW only with the limit raised
    (2, 1000, 1000, 5, 5, 256, True), (3, 700, 1000, 8, 2, 256, True),   # partial tile; S_q < S_kv, GQA
    (2, 1000, 600, 4, 4, 256, True), (1, 77, 77, 3, 3, 256, True),       # rows without keys; 2 tiles only
    (2, 1, 333, 4, 1, 256, True), (2, 960, 960, 2, 2, 256, True),        # one row, MQA; 15 tiles (odd)
    (2, 129, 1025, 4, 1, 256, True), (2, 512, 512, 8, 8, 256, False),    # controls: S_kv past 1024; full
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--short", action="store_true", help="the SHORT shapes instead of SHAPES")
    ap.add_argument("--qshift", action="store_true", help="the QSHIFT shapes instead of SHAPES")
    ap.add_argument("--d256s", action="store_true", help="the D256S shapes instead of SHAPES")
    args = ap.parse_args()
    shapes = SHORT if args.short else QSHIFT if args.qshift else D256S if args.d256s else SHAPES
    import torch

    camel = Camel(args.lib)
    stream = torch.cuda.ExternalStream(camel.stream)
    dev = torch.device("cuda")
    fails = 0
    with torch.cuda.stream(stream):
        for i, (B, Sq, Sk, Hq, Hkv, D, causal) in enumerate(shapes):
            g = torch.Generator(device=dev)
            g.manual_seed(1000 + i)
            s3 = math.sqrt(3.0)

            def rand(S, H):
                return torch.empty(B, S, H, D, device=dev, dtype=torch.bfloat16).uniform_(-s3, s3, generator=g)

            q, k, v = rand(Sq, Hq), rand(Sk, Hkv), rand(Sk, Hkv)
            o = torch.empty(B, Sq, Hq, D, device=dev, dtype=torch.bfloat16)
            lse = torch.empty(B, Hq, Sq, device=dev, dtype=torch.float32)
            desc = camel.lib.cml_attention_desc_bshd(B, Sq, Sk, Hq, Hkv, D, causal, CML_BF16)
            out = []
            for _ in range(2):
                o.view(torch.uint8).fill_(0xFF)
                lse.view(torch.uint8).fill_(0xFF)
                camel.fwd(desc, o, lse, q, k, v)
                torch.cuda.synchronize()
                out.append((o.view(torch.uint8).cpu().numpy().tobytes(), lse.view(torch.uint8).cpu().numpy().tobytes()))
            nan = int(torch.isnan(o).sum().item())
            rep = out[0] == out[1]
            fails += (not rep) + (nan > 0)
            ho, hl = (hashlib.sha256(b).hexdigest()[:16] for b in out[0])
            print(f"B={B} S={Sq}/{Sk} H={Hq}/{Hkv} D={D} {'causal' if causal else 'full  '} "
                  f"O {ho} lse {hl} nan {nan} {'repeat ok' if rep else 'REPEAT DIFFERS'}", flush=True)
            del q, k, v, o, lse
    print(f"ohash: {len(shapes)} shapes, {fails} failures (NaN left or repeat differs)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
