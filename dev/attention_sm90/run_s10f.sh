#!/bin/bash
# Session 9 study, for session 10 (README "Plan (session 9 study): the causal forward order without C7511"):
# the causal work order alone (s10_causal_order.patch: h9f's head groups, longest query tiles first, without
# the half diagonal tiles that made ptxas serialize the wgmmas, C7511) against the unmodified library, in ONE
# device call. Run from the repository root of the lead's tree (the patch and this script are all it needs):
#   bash dev/attention_sm90/run_s10f.sh; tar czf $OUT/logs.tgz -C /tmp/x .        (run with timeout_s 600)
# HALF=1 also measures s10_diag_half_pv.patch on top of the order (NEWH: consumer 0's last P V of a causal
# diagonal tile over half the keys; outside the key loop, no C7511 locally) and runs the test on NEWH instead
# of NEW (NEWH's code is NEW's plus the half; NEW is then checked by ohash.py, bitwise against base).
# Steps: two copies of this tree (/tmp/w10: patched, /tmp/b10: base; if this tree already has the patch it is
# reverted in the base copy), both libraries built at once (new: camel_shared + test_gpu_attention, base:
# camel_shared, niced); every ptxas C75xx / spill line of the attention forward counted per build (C7511 or
# C7520 in the new build: the change is not what was compiled locally, stop before timing); test_gpu_attention
# (new, timeout 300 s) on the GPU while base still builds; ohash.py on every library (O / lse hashes, must be
# equal line for line); then bench/attention_side_by_side.py (--d 64,128 --ops fwd --causal both
# --s 2048,4096,8192,16384 --reps 10) ROUNDS (2) times per library in turns (base, new[, newh], base, ...).
# The summary (printed last, also /tmp/x/summary.txt): per point ours TF/s per run, new / base per round and
# its mean, and the new library's /FA2 and /cuDNN (means over rounds).
# Locally (no GPU): DRY=1 W=/tmp/me_w BASE=/tmp/me_b X=/tmp/me_x bash dev/attention_sm90/run_s10f.sh checks that
# the patches apply and the summary on made-up bench output.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-570}
ROUNDS=${ROUNDS:-2}
HALF=${HALF:-0}
DRY=${DRY:-0}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=${X:-/tmp/x}
W=${W:-/tmp/w10}
BASE=${BASE:-/tmp/b10}
R=$(pwd)
patch=dev/attention_sm90/s10_causal_order.patch
hpatch=dev/attention_sm90/s10_diag_half_pv.patch
fwd=src/kernels/cuda/attention/attention_fwd_sm90
mkdir -p $x /tmp/libs10
: >$x/summary.txt
say() { echo "$*" | tee -a $x/summary.txt; }
rm -rf $W $BASE && mkdir -p $W $BASE
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $BASE
if (cd $W && git apply --check $patch 2>/dev/null); then
    (cd $W && git apply $patch) && say "order patch applied to $W"
elif (cd $BASE && git apply -R --check $patch 2>/dev/null); then
    (cd $BASE && git apply -R $patch) && say "tree already has the order patch: reverted in $BASE"
else
    say "order patch neither applies nor reverts: stop"
    exit 1
fi
if [ "$HALF" = 1 ] && ! (cd $W && git apply --check $hpatch 2>/dev/null); then
    say "half patch does not apply on top of the order: HALF=0"
    HALF=0
fi
VARS="base new"
[ "$HALF" = 1 ] && VARS="base new newh"

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
print("ours TF/s per run (" + " ".join(f"{v}{r}" for v, r in runs) + "), X / base per round (mean), "
      "X's /FA2 and /cuDNN (mean over rounds):")
gm = {v: [] for v in vars_[1:]}
for p in pts:
    line = f"D={p[0]:<3} S={p[1]:<5} {'causal' if p[2] == 'yes' else 'full  '}"
    line += " " + " ".join(f"{data[k][p][0]:6.1f}" if p in data[k] else "     -" for k in runs)
    for v in vars_[1:]:
        q = [data[(v, r)][p][0] / data[("base", r)][p][0] for r in rounds
             if p in data.get((v, r), {}) and p in data.get(("base", r), {})]
        if q:
            mean = math.exp(sum(map(math.log, q)) / len(q))
            gm[v].append((p, mean))
            line += f" | {v}/base " + " ".join(f"{a:.3f}" for a in q) + f" ({mean:.3f})"
        f = [data[(v, r)][p] for r in rounds if p in data.get((v, r), {})]
        if f:
            line += f" /FA2 {sum(a[0] / a[1] for a in f) / len(f):.3f} /cuDNN {sum(a[0] / a[2] for a in f) / len(f):.3f}"
    b = [data[("base", r)][p] for r in rounds if p in data.get(("base", r), {})]
    if b:
        line += f" | base /FA2 {sum(a[0] / a[1] for a in b) / len(b):.3f}"
    print(line)
geo = lambda q: math.exp(sum(map(math.log, q)) / len(q))
for v, g in gm.items():
    if g:
        c = [q for p, q in g if p[2] == "yes"]
        f = [q for p, q in g if p[2] == "no"]
        print(f"{v}/base geomean: all {geo([q for _, q in g]):.3f} ({len(g)} points)"
              + (f", causal {geo(c):.3f}" if c else "") + (f", full {geo(f):.3f}" if f else ""))
EOF
}

if [ "$DRY" = 1 ]; then # local check: the half patch on top, and the summary on made-up bench output
    if [ "$HALF" = 1 ]; then (cd $W && git apply $hpatch) && say "half patch applied on top (dry run)"; fi
    for rd in 1 2; do
        for v in $VARS; do
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + length(v)); print "PyTorch 2.x on made-up GPU"
                printf "%-7s %4s %6s %-6s %9s %7s %7s %6s %7s\n", "op", "D", "S", "causal", "ours TF/s", "FA2", "cuDNN", "/FA2", "/cuDNN"
                split("64 128", ds, " "); split("2048 4096 8192 16384", ss, " ")
                for (i = 1; i <= 2; i++) for (j = 1; j <= 4; j++) for (c = 0; c < 2; c++) {
                    o = 380 + 50 * rand(); f = 262; u = 400
                    printf "%-7s %4d %6d %-6s %9.1f %7.1f %7.1f %6.3f %7.3f\n", "fwd", ds[i], ss[j], c ? "yes" : "no", o, f, u, o / f, o / u } }' \
                >$x/bench_${v}_$rd.txt
        done
    done
    summarize
    cat $x/summary.txt
    exit 0
fi

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B /tmp/bn10 $cfg >/dev/null && timeout 300 cmake --build /tmp/bn10 -j16 --target camel_shared test_gpu_attention) \
    >$x/build_new.log 2>&1 &
pn=$!
(cmake -S $BASE -B /tmp/bb10 $cfg >/dev/null && timeout 320 nice -n 10 cmake --build /tmp/bb10 -j16 --target camel_shared) \
    >$x/build_base.log 2>&1 &
pb=$!
c75() { # the ptxas C75xx / spill lines of a build log by code: the attention forward's, then all
    echo "fwd: $(grep att90_fwd $1 | grep -oE '\(C75[0-9]+\)|[1-9][0-9]* bytes spill' | sort | uniq -c | tr '\n' ' ')" \
        "all: $(grep -oE '\(C75[0-9]+\)|[1-9][0-9]* bytes spill' $1 | sort | uniq -c | tr '\n' ' ')"
}
bad() { grep att90_fwd $1 | grep -E "C7511|C7520|[1-9][0-9]* bytes spill"; } # serialized / divergent wgmma, spills
wait $pn
rn=$?
say "new build rc=$rn at $(at); ptxas: $(c75 $x/build_new.log)"
[ $rn -eq 0 ] || tail -20 $x/build_new.log
if bad $x/build_new.log >/dev/null; then
    say "new build: the forward has C7511 / C7520 / spills (not what was compiled locally): no timing"
    bad $x/build_new.log | cut -c1-200 | head -8 >>$x/summary.txt
    rn=9
fi
if [ $rn -eq 0 ]; then
    cp /tmp/bn10/src/libcamel.so /tmp/libs10/new.so
    if [ "$HALF" = 1 ]; then
        # NEWH in the same build folder: the header keeps its time (the backward includes it but none of
        # what the half patch changes), so only the forward's .cu is compiled again
        cp -p $W/$fwd.cuh /tmp/libs10/fwd_orig.cuh
        (cd $W && git apply $hpatch) && touch -r /tmp/libs10/fwd_orig.cuh $W/$fwd.cuh && touch $W/$fwd.cu
        timeout 120 cmake --build /tmp/bn10 -j16 --target camel_shared test_gpu_attention >$x/build_newh.log 2>&1
        rh=$?
        say "newh build rc=$rh at $(at) ($(grep -c 'Building CUDA' $x/build_newh.log) CUDA objects); ptxas: $(c75 $x/build_newh.log)"
        if [ $rh -eq 0 ] && ! bad $x/build_newh.log >/dev/null; then
            cp /tmp/bn10/src/libcamel.so /tmp/libs10/newh.so
        else
            say "newh not timed"; VARS="base new"
        fi
    fi
    # on the GPU while base still builds: ohash of new, then the forward test (tests link camel_static: the
    # newest build, newh when HALF=1)
    timeout 60 python3 dev/attention_sm90/ohash.py --lib /tmp/libs10/new.so >$x/ohash_new.txt 2>&1
    echo "ohash new rc=$? at $(at): $(tail -1 $x/ohash_new.txt)" >>$x/summary.txt
    tv=new
    [ "$HALF" = 1 ] && tv=newh
    (cd /tmp/bn10 && timeout 300 tests/test_gpu_attention) >$x/test.log 2>&1
    rt=$?
    say "test_gpu_attention ($tv) rc=$rt at $(at): $(grep -cE '^ok' $x/test.log) ok lines; $(grep -E 'FAIL|passed|failed' $x/test.log | tail -3 | tr '\n' ' ')"
fi
wait $pb
rb=$?
say "base build rc=$rb at $(at); ptxas: $(c75 $x/build_base.log)"
[ $rb -eq 0 ] || tail -20 $x/build_base.log
cp /tmp/bb10/src/libcamel.so /tmp/libs10/base.so 2>/dev/null
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    for v in $VARS; do
        [ $v = new ] && continue # done above
        timeout 60 python3 dev/attention_sm90/ohash.py --lib /tmp/libs10/$v.so >$x/ohash_$v.txt 2>&1
        echo "ohash $v rc=$? at $(at): $(tail -1 $x/ohash_$v.txt)" >>$x/summary.txt
    done
    for v in $VARS; do
        [ $v = base ] && continue
        if [ -s $x/ohash_base.txt ] && cmp -s <(grep '^B=' $x/ohash_base.txt) <(grep '^B=' $x/ohash_$v.txt) &&
            [ "$(grep -c 'repeat ok' $x/ohash_$v.txt)" -ge 13 ]; then
            say "O / lse bitwise: $v equal to base on the $(grep -c '^B=' $x/ohash_$v.txt) shapes, repeats equal, no NaN"
        else
            say "O / lse bitwise: $v DIFFERENT from base or incomplete (ohash_*.txt):"
            diff <(grep '^B=' $x/ohash_base.txt) <(grep '^B=' $x/ohash_$v.txt) | head -12 >>$x/summary.txt
        fi
    done
    round=1
    per=$((35 * $(echo $VARS | wc -w))) # seconds one round takes, about (torch import and 16 points a library)
    while [ $round -le $ROUNDS ] && [ "$(left)" -gt $((per + 10)) ]; do
        for v in $VARS; do
            (cd bench && timeout 90 python3 attention_side_by_side.py --lib /tmp/libs10/$v.so --d 64,128 --ops fwd \
                --causal both --s 2048,4096,8192,16384 --reps 10) >$x/bench_${v}_$round.txt 2>&1
            echo "bench $v round $round rc=$? at $(at)" >>$x/summary.txt
        done
        round=$((round + 1))
    done
    summarize
fi
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
