#!/bin/bash
# Session 13 (built by helper h12e in session 12; README "Session 12 (helper h12e): short sequences"): the two
# forward points below 1.5x FA2 (D = 256 causal S = 512: 1.31x; D = 64 causal 1k: 1.48x) against the s13_short
# patch's two switches, in ONE device call. Run from the repository root of the lead's tree:
#   bash dev/attention_sm90/run_s13_short.sh; tar czf $OUT/logs.tgz -C /tmp/x .        (run with timeout_s 600)
# The patch (dev/attention_sm90/s13_short.patch: src/, two test shapes) builds today's kernels by default; "new" is
# the patched tree compiled with -DCML_ATT90_P256_SK=1024 -DCML_ATT90_D64_QSHIFT=1:
#   P256_SK: causal D = 256 with S_kv <= 1024 on the persistent kernel (SEP_O = 2: O stored from registers, the next
#            tile's Q loaded under this tile's tail, its Q and K / V prefetched into L2 at the claim);
#   QSHIFT:  causal D = 64 with S_q % 64 == 0: the partial 192-row query tile at the start of the sequence.
# Variants timed: base (the tree as it is, the patch reverted if present), new, nopf (new with
# CML_ATT_FWD_L2PF=0: the persistent D = 256 path without the L2 prefetch).
# Steps: two copies of the tree (/tmp/w13s new, /tmp/b13s base), both built at once (new: camel_shared +
# test_gpu_attention; base: camel_shared, niced); ptxas C75xx / spill lines of the forward per build (C7511, C7520 or
# a spill in new: no timing); while base builds: test_gpu_attention (new, 150 s box) beside compute-sanitizer
# racecheck and synccheck on it (CML_TEST_SANITIZER=1; forward kernels only where the sanitizer has --kernel-name;
# boxed to leave ~250 s), and beside them ohash.py (18 shapes) and ohash.py --short (15 short causal shapes) on new
# and on new with L2PF=0; then ohash of base
# (every line must be equal: both switches keep every row's key tiles and arithmetic); then
# bench/attention_side_by_side.py --ops fwd --causal both --d 64,256 --s 512,1024,2048 --reps 10, base / new / nopf
# in turns (order alternating per round), ROUNDS (3) rounds as time allows (LIMIT 560 s).
# Summary (printed last, also /tmp/x/summary.txt): ours per run, new / base and nopf / base per round and mean,
# /FA2 and /cuDNN of each, the two target points against 1.5x FA2.
# Locally (no GPU): DRY=1 W=/tmp/me_w BASE=/tmp/me_b X=/tmp/me_x bash dev/attention_sm90/run_s13_short.sh checks that
# the patch applies (or reverts) and the summary on made-up bench output.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-560}
ROUNDS=${ROUNDS:-3}
DRY=${DRY:-0}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=${X:-/tmp/x}
W=${W:-/tmp/w13s}
BASE=${BASE:-/tmp/b13s}
L=/tmp/libs13s
patch=dev/attention_sm90/s13_short.patch
NEWFLAGS="-DCML_ATT90_P256_SK=1024 -DCML_ATT90_D64_QSHIFT=1"
mkdir -p $x $L
: >$x/summary.txt
say() { echo "$*" | tee -a $x/summary.txt; }
rm -rf $W $BASE && mkdir -p $W $BASE
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $BASE
if (cd $W && git apply --check $patch 2>/dev/null); then
    (cd $W && git apply $patch) && say "s13_short patch applied to $W"
elif (cd $BASE && git apply -R --check $patch 2>/dev/null); then
    (cd $BASE && git apply -R $patch) && say "tree already has the s13_short patch: reverted in $BASE"
else
    say "s13_short patch neither applies nor reverts: stop"
    exit 1
fi
VARS="base new nopf"

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
print("ours TF/s per run (" + " ".join(f"{v}{r}" for v, r in runs) + "), then per variant: v/base per round "
      "(geomean), v's /FA2 and /cuDNN (means over rounds):")
gm = {v: [] for v in vars_[1:]}
fa2 = {}
for p in pts:
    line = f"D={p[0]:<3} S={p[1]:<5} {'causal' if p[2] == 'yes' else 'full  '}"
    line += " " + " ".join(f"{data[k][p][0]:6.1f}" if p in data[k] else "     -" for k in runs)
    for v in vars_:
        f = [data[(v, r)][p] for r in rounds if p in data.get((v, r), {})]
        q = [data[(v, r)][p][0] / data[("base", r)][p][0] for r in rounds
             if v != "base" and p in data.get((v, r), {}) and p in data.get(("base", r), {})]
        if q:
            gm[v].append((p, geo(q)))
            line += f" | {v}/base " + " ".join(f"{a:.3f}" for a in q) + f" ({geo(q):.3f})"
        if f:
            fa2[(v, p)] = sum(a[0] / a[1] for a in f) / len(f)
            line += f" {v} /FA2 {fa2[(v, p)]:.3f} /cuDNN {sum(a[0] / a[2] for a in f) / len(f):.3f}"
    print(line)
for v, g in gm.items():
    for d in sorted({p[0] for p, _ in g}):
        for s in sorted({p[1] for p, _ in g}):
            c = [q for p, q in g if p[0] == d and p[1] == s and p[2] == "yes"]
            f = [q for p, q in g if p[0] == d and p[1] == s and p[2] == "no"]
            if c or f:
                print(f"D={d} S={s} {v}/base: " + (f"causal {c[0]:.3f}" if c else "") + (f", full {f[0]:.3f}" if f else ""))
print("targets (>= 1.5x FA2; base -> new / nopf):")
for p in ((256, 512, "yes"), (64, 1024, "yes")):
    print(f"  D={p[0]} S={p[1]} causal /FA2: " + " -> ".join(f"{v} {fa2[(v, p)]:.3f}" for v in vars_ if (v, p) in fa2))
EOF
}

bench() { # bench VAR ROUND: the library of VAR (nopf: new's with the L2 prefetch off)
    local lib=$1 envv=""
    [ $1 = nopf ] && lib=new && envv="CML_ATT_FWD_L2PF=0"
    (cd bench && env $envv timeout 110 python3 attention_side_by_side.py --lib $L/$lib.so --d 64,256 --ops fwd \
        --causal both --s 512,1024,2048 --reps 10) >$x/bench_$1_$2.txt 2>&1
    echo "bench $1 round $2 rc=$? at $(at)" >>$x/summary.txt
}

if [ "$DRY" = 1 ]; then # local check: the summary on made-up bench output
    for rd in 1 2; do
        for v in $VARS; do
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + length(v)); print "PyTorch 2.x on made-up GPU"
                printf "%-7s %4s %6s %-6s %9s %7s %7s %6s %7s\n", "op", "D", "S", "causal", "ours TF/s", "FA2", "cuDNN", "/FA2", "/cuDNN"
                split("64 256", ds, " "); split("512 1024 2048", ss, " ")
                for (i = 1; i <= 2; i++) for (j = 1; j <= 3; j++) for (c = 0; c < 2; c++) {
                    o = 280 + 50 * rand(); f = 204; u = 310
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
(cmake -S $W -B /tmp/bn13s $cfg "-DCMAKE_CUDA_FLAGS=$NEWFLAGS" >/dev/null &&
    timeout 300 cmake --build /tmp/bn13s -j16 --target camel_shared test_gpu_attention) >$x/build_new.log 2>&1 &
pn=$!
(cmake -S $BASE -B /tmp/bb13s $cfg >/dev/null && timeout 320 nice -n 10 cmake --build /tmp/bb13s -j16 --target camel_shared) \
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
ps=""
if [ $rn -eq 0 ]; then
    cp /tmp/bn13s/src/libcamel.so $L/new.so
    # on the GPU while base still builds: the forward test and the sanitizers (boxed so that the bench keeps
    # ~250 s), the ohash runs of new (and new without the L2 prefetch) beside them
    T=/tmp/bn13s/tests/test_gpu_attention
    (timeout 150 $T >$x/test.log 2>&1; echo "rc=$?" >>$x/test.log) &
    ps="$!"
    ts=$(($(left) - 260))
    [ $ts -gt 150 ] && ts=150
    if [ $ts -ge 30 ]; then
        filt=""
        compute-sanitizer --help 2>&1 | grep -q -- '--kernel-name' && filt="--kernel-name kns=att90_fwd"
        for tool in racecheck synccheck; do
            (CML_TEST_SANITIZER=1 timeout $ts compute-sanitizer --tool $tool $filt --error-exitcode 9 $T \
                >$x/san_$tool.txt 2>&1; echo "rc=$?" >>$x/san_$tool.txt) &
            ps="$ps $!"
        done
        say "test_gpu_attention (time box 150 s) + sanitizers racecheck, synccheck started at $(at), time box $ts s, filter '${filt:-none}'"
    else
        say "test_gpu_attention started at $(at); sanitizers not run: $(left) s left"
    fi
    for set in all short; do
        a=""; [ $set = short ] && a=--short
        timeout 60 python3 dev/attention_sm90/ohash.py --lib $L/new.so $a >$x/ohash_new_$set.txt 2>&1
        ro=$?
        CML_ATT_FWD_L2PF=0 timeout 60 python3 dev/attention_sm90/ohash.py --lib $L/new.so $a >$x/ohash_nopf_$set.txt 2>&1
        echo "ohash new $set rc=$ro, nopf rc=$? at $(at): $(tail -1 $x/ohash_new_$set.txt)" >>$x/summary.txt
        [ $ro -eq 124 ] && say "ohash new timed out (a hang?): no timing" && rn=8
    done
fi
wait $pb
rb=$?
say "base build rc=$rb at $(at); ptxas: $(c75 $x/build_base.log)"
[ $rb -eq 0 ] || tail -20 $x/build_base.log
cp /tmp/bb13s/src/libcamel.so $L/base.so 2>/dev/null
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    for set in all short; do
        a=""; [ $set = short ] && a=--short
        timeout 60 python3 dev/attention_sm90/ohash.py --lib $L/base.so $a >$x/ohash_base_$set.txt 2>&1
        echo "ohash base $set rc=$? at $(at): $(tail -1 $x/ohash_base_$set.txt)" >>$x/summary.txt
        n=$(grep -c '^B=' $x/ohash_base_$set.txt)
        for v in new nopf; do
            if [ "$n" -gt 0 ] && cmp -s <(grep '^B=' $x/ohash_base_$set.txt) <(grep '^B=' $x/ohash_${v}_$set.txt) &&
                [ "$(grep -c 'repeat ok' $x/ohash_${v}_$set.txt)" -eq $n ] && [ "$(grep -c 'nan 0 ' $x/ohash_${v}_$set.txt)" -eq $n ]; then
                say "O / lse bitwise ($set): $v equal to base on the $n shapes, repeats equal, no NaN"
            else
                say "O / lse bitwise ($set): $v DIFFERENT from base or incomplete (ohash_*_$set.txt):"
                diff <(grep '^B=' $x/ohash_base_$set.txt) <(grep '^B=' $x/ohash_${v}_$set.txt) | head -8 >>$x/summary.txt
            fi
        done
    done
fi
for p in $ps; do wait $p; done # the test and sanitizers (time-boxed) leave the GPU to the bench
[ -s $x/test.log ] && say "test_gpu_attention (new) $(tail -1 $x/test.log) at $(at): $(grep -cE '^ok' $x/test.log) ok lines; $(grep -E 'sm90 forward|FAIL|passed|failed' $x/test.log | tail -4 | tr '\n' ' ')"
for tool in racecheck synccheck; do
    [ -s $x/san_$tool.txt ] && say "sanitizer $tool (new) $(tail -1 $x/san_$tool.txt) (124: cut by the time box): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|sm90 forward' $x/san_$tool.txt | tr '\n' ' ' | cut -c1-300)"
done
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    round=1
    order="$VARS"
    need=100 # s per round (three bench calls), the last round's measured once one has run
    while [ $round -le $ROUNDS ]; do
        [ "$(left)" -gt $need ] || break
        t1=$(date +%s)
        for v in $order; do bench $v $round; done
        need=$(($(date +%s) - t1 + 5))
        order=$(echo $order | awk '{for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : "")}')
        round=$((round + 1))
    done
    summarize
fi
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
