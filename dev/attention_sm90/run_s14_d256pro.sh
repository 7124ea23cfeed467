#!/bin/bash
# Session 14 (built by helper h13d in session 13; README "Session 13 (helper h13d)"): the D = 256 one-tile forward
# kernel with the PRO prologue -- Q in two 64-row halves with their own full barriers (consumer c waits for its
# 32 KB of Q, not all 64), the first stages issued right after the barrier init (before the __syncthreads and
# setmaxnreg) in the order Q0, K0, Q1, K1, V0, V1, the four tensor maps prefetched first -- as a kernel
# instantiation of its own (template flag PRO), taken for causal D = 256 with S_kv <= 1024 by default
# (CML_ATT_FWD_D256PRO: 0 never, 1 every D = 256 problem); and, off by default, PF (CML_ATT_FWD_D256PRO_PF=1): the
# producer of a PRO CTA also prefetches into L2 the Q, K_0, V_0 of the block one wave (the SM count) ahead.
# The 10 old forward kernels must stay SASS-identical.
# ONE device call, from the repository root of the lead's tree:
#   bash dev/attention_sm90/run_s14_d256pro.sh; tar czf $OUT/logs.tgz -C /tmp/x .        (run with timeout_s 600)
# base = the tree without dev/attention_sm90/s14_d256pro.patch (reverted if the tree has it), new = with it.
# Steps: two copies built at once (new: camel_shared + test_gpu_attention with -Xptxas=-v; base: camel_shared,
# niced); ptxas C75xx / spill lines of the forward (new: a C7511 / C7520 / spill there = no timing) and the PRO
# kernels' registers; sass_same.py (want 10 identical, 4 only in new); then at once: the whole test_gpu_attention
# (new, box TT = 300 s), test_sm90_fwd with every D = 256 problem on PRO (CML_ATT_FWD_D256PRO=1: full attention and
# 129 x 1025 too), compute-sanitizer racecheck + synccheck on test_sm90_fwd's D = 256 shapes (CML_TEST_SANITIZER=1
# CML_TEST_SM90_D=256: 77 x 77 GQA, 1 x 300 MQA (second Q half wholly past S_q), 300 x 65, bf16) by default and with
# CML_ATT_FWD_D256PRO=1, test_sm90_fwd once more with PF, and ohash.py (all, --short, --d256s) of base, new
# (default), all (CML_ATT_FWD_D256PRO=1) and pf (all + PF): EVERY line must equal base's (PRO and PF change when
# data arrives, not the arithmetic), repeats equal, no NaN.
# Then bench/attention_side_by_side.py --d 256 --ops fwd --causal both --s 512,1024,2048 --reps 10 for base / new /
# pf in turns (order rotating), ROUNDS (3) rounds as time allows; "new" runs with CML_ATT_FWD_D256PRO=1, so every
# point (full and causal 2k too) is measured on the PRO kernel; "pf" adds CML_ATT_FWD_D256PRO_PF=1.
# Summary (printed LAST, also /tmp/x/summary.txt): ours TF/s per run, new/base per round and geomean, /FA2 and us;
# the TARGET line (D = 256 causal 512 /FA2 >= 1.5, <= 112.3 us).
# Decide (README "Session 13 (helper h13d)"): keep PRO (merge src / tests) if new/base >= 1.01 at causal 512 (geomean,
# no round below 0.99); CML_ATT90_D256PRO_SK = the largest causal S of 512 / 1k / 2k with new/base >= 1.01. PF on
# by default (for the PRO launches) only if pf/new >= 1.01 at causal 512 and no PRO point pf/new < 0.99. Below 1.01
# at causal 512 for both: not kept (the patch stays under dev/ with its numbers).
# Locally (no GPU): DRY=1 W=/tmp/p_w BASE=/tmp/p_b X=/tmp/p_x bash dev/attention_sm90/run_s14_d256pro.sh checks that
# the patch applies (or reverts) and the summary on made-up bench output.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-560}
ROUNDS=${ROUNDS:-3}
TT=${TT:-300}
DRY=${DRY:-0}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=${X:-/tmp/x}
W=${W:-/tmp/w14p}
BASE=${BASE:-/tmp/b14p}
L=/tmp/libs14p
patch=dev/attention_sm90/s14_d256pro.patch
mkdir -p $x $L
: >$x/summary.txt
say() { echo "$*" | tee -a $x/summary.txt; }
. dev/ab_lib.sh
ab_trees $W $BASE $patch | tee -a $x/summary.txt
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
VARS="base new pf"
declare -A ENVS=([base]="" [new]="CML_ATT_FWD_D256PRO=1" [pf]="CML_ATT_FWD_D256PRO=1 CML_ATT_FWD_D256PRO_PF=1")
S_LIST=512,1024,2048

summarize() { # the table from $x/bench_{VAR}_{ROUND}.txt
    python3 - "$x" $VARS >>$x/summary.txt <<'EOF'
import glob, os, re, sys, math
x, vars_ = sys.argv[1], sys.argv[2:]
data = {}  # (var, round) -> {(D, S, causal): (ours, fa2, cudnn)}
for f in glob.glob(os.path.join(x, "bench_*_*.txt")):
    m = re.match(r"bench_(\w+?)_(\d+)\.txt$", os.path.basename(f))
    if not m or m.group(1) not in vars_:
        continue
    rows = {}
    for line in open(f):
        t = line.split()
        if len(t) == 9 and t[0] == "fwd" and t[3] in ("yes", "no"):
            rows[(int(t[1]), int(t[2]), t[3])] = tuple(map(float, t[4:7]))
    data[(m.group(1), int(m.group(2)))] = rows
if not data:
    print("no bench output"); sys.exit()
rounds = sorted({r for _, r in data})
pts = sorted({p for rows in data.values() for p in rows}, key=lambda p: (p[0], p[2], p[1]))
runs = [(v, r) for r in rounds for v in vars_ if (v, r) in data]
geo = lambda q: math.exp(sum(map(math.log, q)) / len(q))
def us(p, tf):  # forward time of the bench's problem (B S = 16384, H = 2048 / D) from TF/s
    D, S, c = p
    B, H = 16384 // S, 2048 // D
    return 4.0 * B * H * S * S * D * (0.5 if c == "yes" else 1.0) / (tf * 1e12) * 1e6
print("ours TF/s per run (" + " ".join(f"{v}{r}" for v, r in runs) + "); X/base per round (geomean); "
      "/FA2 per variant (means over rounds); every D = 256 point runs PRO in new and pf (CML_ATT_FWD_D256PRO=1):")
res = {}
for p in pts:
    line = f"  D={p[0]:<3} S={p[1]:<5} {'causal' if p[2] == 'yes' else 'full  '}"
    line += " " + " ".join(f"{data[k][p][0]:6.1f}" if p in data[k] else "     -" for k in runs)
    for v in vars_[1:]:
        q = [data[(v, r)][p][0] / data[("base", r)][p][0] for r in rounds
             if p in data.get((v, r), {}) and p in data.get(("base", r), {})]
        if q:
            res[(v, p)] = geo(q)
            line += f" | {v}/base " + " ".join(f"{a:.3f}" for a in q) + f" ({geo(q):.3f})"
    fa2 = {}
    for v in vars_:
        f = [data[(v, r)][p] for r in rounds if p in data.get((v, r), {})]
        if f:
            fa2[v] = (sum(a[0] / a[1] for a in f) / len(f), sum(us(p, a[0]) for a in f) / len(f))
    line += " | /FA2 " + " ".join(f"{v} {fa2[v][0]:.3f} ({fa2[v][1]:.1f} us)" for v in vars_ if v in fa2)
    print(line)
for v in vars_[1:]:
    nt = [g for (vv, p), g in res.items() if vv == v and p[2] == "no"]
    tk = {p: g for (vv, p), g in res.items() if vv == v and p[2] == "yes"}
    if tk:
        print(f"{v}/base geomean: causal " + ", ".join(f"S={p[1]} {g:.3f}" for p, g in sorted(tk.items())) +
              (f"; full {min(nt):.3f} - {max(nt):.3f}" if nt else ""))
if "pf" in vars_ and "new" in vars_:  # the L2 prefetch alone: pf against new, per round (both on PRO)
    out = []
    for p in pts:
        q = [data[("pf", r)][p][0] / data[("new", r)][p][0] for r in rounds
             if p in data.get(("pf", r), {}) and p in data.get(("new", r), {})]
        if q:
            out.append(f"{'causal' if p[2] == 'yes' else 'full'} {p[1]} {geo(q):.3f} ({' '.join(f'{a:.3f}' for a in q)})")
    print("pf/new geomean (rounds): " + "; ".join(out))
p512 = (256, 512, "yes")
for v in vars_:
    f = [data[(v, r)][p512] for r in rounds if p512 in data.get((v, r), {})]
    if f:
        m = sum(a[0] / a[1] for a in f) / len(f)
        print(f"TARGET D=256 causal 512: {v} /FA2 {m:.3f} ({'>= 1.5: met' if m >= 1.5 else 'below 1.5'}), "
              f"{sum(us(p512, a[0]) for a in f) / len(f):.1f} us (1.5x FA2 = 112.3 us at FA2's 168 us)")
EOF
}

bench() { # bench VAR ROUND
    (cd bench && env ${ENVS[$1]} timeout 110 python3 attention_side_by_side.py --lib $L/lib.so.$1 --d 256 --ops fwd \
        --causal both --s $S_LIST --reps 10) >$x/bench_$1_$2.txt 2>&1
    echo "bench $1 round $2 rc=$? at $(at)" >>$x/summary.txt
}

if [ "$DRY" = 1 ]; then # local check: the summary on made-up bench output
    for rd in 1 2; do
        for v in $VARS; do
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + length(v)); print "PyTorch 2.x on made-up GPU"
                printf "%-7s %4s %6s %-6s %9s %7s %7s %6s %7s\n", "op", "D", "S", "causal", "ours TF/s", "FA2", "cuDNN", "/FA2", "/cuDNN"
                split("512 1024 2048", ss, " ")
                for (j = 1; j <= 3; j++) for (c = 0; c < 2; c++) {
                    o = 268 + 60 * rand(); f = 204; u = 310
                    printf "%-7s %4d %6d %-6s %9.1f %7.1f %7.1f %6.3f %7.3f\n", "fwd", 256, ss[j], c ? "yes" : "no", o, f, u, o / f, o / u } }' \
                >$x/bench_${v}_$rd.txt
        done
    done
    summarize
    cat $x/summary.txt
    exit 0
fi

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B /tmp/bn14p $cfg -DCMAKE_CUDA_FLAGS=-Xptxas=-v >/dev/null &&
    timeout 300 cmake --build /tmp/bn14p -j16 --target camel_shared test_gpu_attention) >$x/build_new.log 2>&1 &
pn=$!
(cmake -S $BASE -B /tmp/bb14p $cfg >/dev/null && timeout 320 nice -n 10 cmake --build /tmp/bb14p -j16 --target camel_shared) \
    >$x/build_base.log 2>&1 &
pb=$!
c75() { # the ptxas C75xx / spill lines of a build log by code: the attention forward's, then all
    echo "fwd: $(grep att90_fwd $1 | grep -oE '\(C75[0-9]+\)|[1-9][0-9]* bytes spill' | sort | uniq -c | tr '\n' ' ')" \
        "all: $(grep -oE '\(C75[0-9]+\)|[1-9][0-9]* bytes spill' $1 | sort | uniq -c | tr '\n' ' ')"
}
bad() { grep att90_fwd $1 | grep -E "C7511|C7520|[1-9][0-9]* bytes spill"; } # serialized / divergent wgmma, spills
pro_regs() { # registers of the PRO kernels (mangled ...ELb1EEv: the trailing bool PRO = true): ptxas -v's lines
    grep -A4 "Compiling entry function '_Z21cml__att90_fwd_kernelILi[01]ELi256ELi80E.*ELb1EEv" $1 |
        grep -oE "Used [0-9]+ registers|[0-9]+ bytes spill stores" | sort | uniq -c | tr '\n' ' '
}
ohash() { # ohash NAME LIB [ENV...]: the three shape sets
    local name=$1 lib=$2 set a
    shift 2
    for set in all short d256s; do
        a=""; [ $set != all ] && a=--$set
        env "$@" timeout 90 python3 dev/attention_sm90/ohash.py --lib $lib $a >$x/ohash_${name}_$set.txt 2>&1
        echo "ohash $name $set rc=$? at $(at): $(tail -1 $x/ohash_${name}_$set.txt)" >>$x/summary.txt
    done
}
wait $pn
rn=$?
say "new build rc=$rn at $(at); ptxas: $(c75 $x/build_new.log)"
say "PRO kernels (4: bf16 / f16, grouped or not) ptxas -v: $(pro_regs $x/build_new.log) (want 4 x 'Used 168 registers', 0 spill)"
[ $rn -eq 0 ] || tail -20 $x/build_new.log
if bad $x/build_new.log >/dev/null; then
    say "new build: the forward has C7511 / C7520 / spills (not what was compiled locally): no timing"
    bad $x/build_new.log | cut -c1-200 | head -8 >>$x/summary.txt
    rn=9
fi
ps=""
if [ $rn -eq 0 ]; then
    cp /tmp/bn14p/src/libcamel.so $L/lib.so.new
    T=/tmp/bn14p/tests/test_gpu_attention
    tt=$TT
    [ $tt -gt $(($(left) - 150)) ] && tt=$(($(left) - 150))
    [ $tt -lt 240 ] && tt=240
    (timeout $tt $T >$x/test.log 2>&1; echo "rc=$?" >>$x/test.log) &
    ps="$!"
    (CML_TEST_ONLY=test_sm90_fwd CML_ATT_FWD_D256PRO=1 timeout $((tt / 2)) $T >$x/test_all.log 2>&1
        echo "rc=$?" >>$x/test_all.log
        CML_TEST_ONLY=test_sm90_fwd CML_ATT_FWD_D256PRO=1 CML_ATT_FWD_D256PRO_PF=1 timeout $((tt / 2)) $T >$x/test_pf.log 2>&1
        echo "rc=$?" >>$x/test_pf.log) &
    ps="$ps $!"
    filt=""
    compute-sanitizer --help 2>&1 | grep -q -- '--kernel-name' && filt="--kernel-name kns=att90_fwd"
    (for e in def all; do
        for tool in racecheck synccheck; do
            env $([ $e = all ] && echo CML_ATT_FWD_D256PRO=1) CML_TEST_SANITIZER=1 CML_TEST_ONLY=test_sm90_fwd CML_TEST_SM90_D=256 \
                timeout $((tt / 4)) compute-sanitizer --tool $tool $filt --error-exitcode 9 $T >$x/san_${tool}_$e.txt 2>&1
            echo "rc=$?" >>$x/san_${tool}_$e.txt
        done
    done) &
    ps="$ps $!"
    say "test_gpu_attention (box $tt s), test_sm90_fwd all-PRO / pf (box $((tt / 2)) s each), racecheck + synccheck def / all (box $((tt / 4)) s each, filter '${filt:-none}') started at $(at)"
    ohash new $L/lib.so.new
    ohash all $L/lib.so.new CML_ATT_FWD_D256PRO=1
    ohash pf $L/lib.so.new CML_ATT_FWD_D256PRO=1 CML_ATT_FWD_D256PRO_PF=1
    grep -q 'rc=124' <(grep -E '^ohash (new|all) ' $x/summary.txt) && say "ohash new / all timed out (a hang?): no timing" && rn=8
    grep -q 'rc=124' <(grep -E '^ohash pf ' $x/summary.txt) && say "ohash pf timed out (a hang?): pf not timed" &&
        VARS="base new"
    ln -sf $L/lib.so.new $L/lib.so.pf
fi
wait $pb
rb=$?
say "base build rc=$rb at $(at); ptxas: $(c75 $x/build_base.log)"
[ $rb -eq 0 ] || tail -20 $x/build_base.log
cp /tmp/bb14p/src/libcamel.so $L/lib.so.base 2>/dev/null
ob=$(find /tmp/bb14p -name attention_fwd_sm90.cu.o 2>/dev/null | head -1)
on=$(find /tmp/bn14p -name attention_fwd_sm90.cu.o 2>/dev/null | head -1)
if [ -n "$ob" ] && [ -n "$on" ]; then
    CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump) python3 dev/attention_sm90/sass_same.py \
        $ob $on >$x/sass_same.txt 2>&1
    say "SASS base vs new (attention_fwd_sm90): $(tail -1 $x/sass_same.txt); $(grep -c '^only in new' $x/sass_same.txt) only in new (the PRO kernels: 4), $(grep -c '^DIFFERS' $x/sass_same.txt) differ"
else
    say "SASS check: attention_fwd_sm90.cu.o not found in /tmp/bb14p or /tmp/bn14p"
fi
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    ohash base $L/lib.so.base
    # PRO computes the same tiles with the same arithmetic: every line of new and all must equal base's
    python3 - $x <<'EOF' | tee -a $x/summary.txt
import sys
x = sys.argv[1]
def lines(name, s):
    try:
        return [l.rstrip("\n") for l in open(f"{x}/ohash_{name}_{s}.txt") if l.startswith("B=")]
    except OSError:
        return []
for s in ("all", "short", "d256s"):
    base = lines("base", s)
    for v in ("new", "all", "pf"):
        got = lines(v, s)
        if not base or len(got) != len(base):
            print(f"ohash {s}: {v} incomplete ({len(got)} of {len(base)} lines)"); continue
        bad = [b for a, b in zip(base, got) if a != b or "repeat ok" not in b or " nan 0 " not in b]
        print(f"ohash {s}: {v}: {len(got) - len(bad)} of {len(got)} lines equal to base (repeats ok, no NaN), {len(bad)} bad")
        for b in bad[:4]:
            print(f"   bad: {b}")
EOF
fi
for p in $ps; do wait $p; done # the tests and sanitizers (time-boxed) leave the GPU to the bench
if [ -s $x/test.log ]; then
    say "test_gpu_attention (new) $(tail -1 $x/test.log) (124: cut by the box) at $(at): $(grep -E 'tests passed' $x/test.log | tail -1)"
    grep -E 'sm90 forward|QSHIFT|PRO' $x/test.log | head -4 | cut -c1-240 | tee -a $x/summary.txt
    grep -iE 'FAIL|failed' $x/test.log | head -6 | cut -c1-240 | tee -a $x/summary.txt
fi
for e in all pf; do
    [ -s $x/test_$e.log ] && say "test_sm90_fwd ($e: CML_ATT_FWD_D256PRO=1$([ $e = pf ] && echo ' + PF')) $(tail -1 $x/test_$e.log): $(grep -E 'tests passed' $x/test_$e.log | tail -1)" &&
        grep -iE 'FAIL|failed' $x/test_$e.log | head -4 | cut -c1-240 | tee -a $x/summary.txt
done
for e in def all; do
    for tool in racecheck synccheck; do
        [ -s $x/san_${tool}_$e.txt ] && say "sanitizer $tool ($e, test_sm90_fwd D = 256) $(tail -1 $x/san_${tool}_$e.txt) (124: cut by the box): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|tests passed' $x/san_${tool}_$e.txt | tr '\n' ' ' | cut -c1-300)"
    done
done
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    round=1
    order="$VARS"
    need=45 # s per round, the last round's measured once one has run
    while [ $round -le $ROUNDS ]; do
        [ "$(left)" -gt $need ] || break
        t1=$(date +%s)
        for v in $order; do bench $v $round; done
        need=$(($(date +%s) - t1 + 5))
        order=$(echo $order | awk '{for (i = 2; i <= NF; i++) printf "%s ", $i; printf "%s", $1}') # rotate
        round=$((round + 1))
    done
    say "bench rounds run: $((round - 1)) (a point missing from a round: see bench_*.txt)"
    summarize
fi
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
