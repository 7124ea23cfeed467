#!/usr/bin/env python3
"""Summarizes the GEMM kernel's timelines (a build with -DCML_SM90_DEV_TIMELINE=1 run with CML_SM90_TL_DIR set:
gemm_sm90_kernel.cuh, gemm_sm90.cu's tl_dump) -- where a CTA's time goes, tile by tile.

    python3 dev/gemm_sm90/timeline.py DIR/tl_*.txt

Per file (one launch): the launch's span by %globaltimer, the SM clock (clock64 / globaltimer over each CTA's life),
and per tile slot the medians over CTAs (cycles, and as us at that clock) of
  wait   first stage landed - tile start (consumer 0: the data the producer had not brought yet)
  main   main loop end - first stage landed, and `eff`: the tensor cores' cycles for the tile's k-blocks
         (4 x BN a 128-row k-block of 16-bit inputs: 2 x 128 x BN x 64 flops at 4096 a cycle) / main
  epi    epilogue end - main loop end (consumer 0: staging and issuing the TMA stores, tensor cores idle)
  c1     consumer 1's main loop end - consumer 0's (their skew)
  lead   tile start - the producer's first load of the tile (how far ahead the producer is)
and each CTA's ramp (start to tile 0's start), tail (last epilogue end to the end: the stores' wait)."""
import statistics
import sys


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def load(path):
    head = open(path).readline().split()
    meta = dict(zip(head[0::2], head[1::2]))
    M, N, K = (int(x) for x in head[1:4])
    ctas = {}
    for line in open(path).readlines()[1:]:
        f = [int(x) for x in line.split()]
        c, slot, ev = f[0], f[1], f[2:]
        d = ctas.setdefault(c, {"tiles": {}})
        if slot < 0:
            d["meta"] = ev
        elif any(ev):
            d["tiles"][slot] = ev
    return (M, N, K), {k: int(v) for k, v in meta.items() if k != "shape"}, ctas


def summarize(path):
    (M, N, K), meta, ctas = load(path)
    bn, splits = meta["bn"], max(meta["splits"], 1)
    kb = -(-K // 64)
    kb = -(-kb // splits)
    ideal = kb * 4 * bn
    live = [d for d in ctas.values() if "meta" in d and d["meta"][3] > d["meta"][2] > 0]
    t0 = min(d["meta"][2] for d in live)
    t1 = max(d["meta"][3] for d in live)
    ghz = med([(d["meta"][1] - d["meta"][0]) / (d["meta"][3] - d["meta"][2]) for d in live])
    us = lambda cyc: cyc / ghz / 1000.0
    print(f"{path}: {M}x{N}x{K} bn {bn} stages {meta['stages']} cluster {meta['cluster']} splits {splits} "
          f"grid {meta['grid']}: span {(t1 - t0) / 1000:.2f} us, clock {ghz:.3f} GHz, starts spread "
          f"{(max(d['meta'][2] for d in live) - t0) / 1000:.2f} us; ideal main loop {ideal} cyc ({us(ideal):.2f} us)")
    slots = sorted({s for d in live for s in d["tiles"]})
    print("  slot  ctas   wait(cyc)  main(cyc)  eff   epi(cyc)  c1-c0  lead(cyc) | wait   main   epi (us)")
    for s in slots:
        rows = [d["tiles"][s] for d in live if s in d["tiles"]]
        w = med([e[1] - e[0] for e in rows if e[1] and e[0]])
        m = med([e[2] - e[1] for e in rows if e[2] and e[1]])
        ep = med([e[3] - e[2] for e in rows if e[3] and e[2]])
        sk = med([e[4] - e[2] for e in rows if e[4] and e[2]])
        ld = med([e[0] - e[6] for e in rows if e[0] and e[6]])
        print(f"  {s:4d} {len(rows):5d} {w:10.0f} {m:10.0f} {ideal / m:5.3f} {ep:9.0f} {sk:6.0f} {ld:10.0f} |"
              f" {us(w):5.2f} {us(m):6.2f} {us(ep):5.2f}")
    ramp = med([d["tiles"][0][0] - d["meta"][0] for d in live if 0 in d["tiles"]])
    init = med([d["meta"][0] - d["meta"][6] for d in live if d["meta"][6]])
    located = med([d["meta"][7] - d["meta"][0] for d in live if d["meta"][7]])
    issued = med([d["tiles"][0][6] - d["meta"][0] for d in live if 0 in d["tiles"] and d["tiles"][0][6]])
    print(f"  entry -> barriers initialized {init:.0f} cyc; then the producer's first tile located {located:.0f}, "
          f"its first load issued {issued:.0f}")
    tails = []
    for d in live:
        last = max(d["tiles"]) if d["tiles"] else None
        if last is not None and d["tiles"][last][3]:
            tails.append(d["meta"][1] - d["tiles"][last][3])
    busy = med([sum(e[2] - e[1] for e in d["tiles"].values() if e[2] and e[1]) / (d["meta"][1] - d["meta"][0])
                for d in live])
    print(f"  ramp {ramp:.0f} cyc ({us(ramp):.2f} us), tail {med(tails):.0f} cyc ({us(med(tails)):.2f} us), "
          f"main loops {100 * busy:.1f}% of a CTA's life (median)")
    ends = sorted((d["meta"][3] - t0) / 1000 for d in live)
    print(f"  CTA ends (us from the first start): min {ends[0]:.2f} median {ends[len(ends) // 2]:.2f} max {ends[-1]:.2f}")


for p in sys.argv[1:]:
    summarize(p)
