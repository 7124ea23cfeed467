#!/bin/bash
# Session 10 (helper h10b; README "Session 10 (helper h10b)"): the D = 64 forward on three consumer
# warpgroups with 192-row query tiles (s10b_bm192.patch) against the unmodified library, in ONE device
# call. Run from the repository root of the lead's tree (the patch and this script are all it needs):
#   bash dev/attention_sm90/run_s10b.sh; tar czf $OUT/logs.tgz -C /tmp/x .        (run with timeout_s 600)
# Steps: two copies of this tree (/tmp/w10b: patched, /tmp/b10b: base; if this tree already has the patch it is
# reverted in the base copy), both libraries built at once (new: camel_shared + test_gpu_attention, base:
# camel_shared, niced); every ptxas C75xx / spill line of the attention forward counted per build (C7511 or
# C7520 or a spill in the new build: not what was compiled locally, stop before timing); while base still
# builds: ohash.py on new, then at once test_gpu_attention (new, time-boxed) and compute-sanitizer racecheck and
# synccheck on it (CML_TEST_SANITIZER=1, only the forward kernels instrumented when the sanitizer has --kernel-name,
# time-boxed: a summary or "cut"); ohash.py on base (O / lse hashes must be equal line for line: the 192-row
# tiles compute every row's key tiles as the 128-row ones did); then bench/attention_side_by_side.py
# (--ops fwd --causal both --s 2048,4096,8192,16384 --reps 10; --d 64,128 in round 1 (D = 128: SASS identical,
# shows the noise), --d 64 after) ROUNDS (3) times per library in turns (base, new, base, ...), as time allows.
# The summary (printed last, also /tmp/x/summary.txt): per point ours TF/s per run, new / base per round and
# its mean, and the new library's /FA2 and /cuDNN (means over rounds).
# Locally (no GPU): DRY=1 W=/tmp/me_w BASE=/tmp/me_b X=/tmp/me_x bash dev/attention_sm90/run_s10b.sh checks that
# the patch applies and the summary on made-up bench output.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-560}
ROUNDS=${ROUNDS:-3}
DRY=${DRY:-0}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=${X:-/tmp/x}
W=${W:-/tmp/w10b}
BASE=${BASE:-/tmp/b10b}
L=/tmp/libs10b
patch=dev/attention_sm90/s10b_bm192.patch
mkdir -p $x $L
: >$x/summary.txt
say() { echo "$*" | tee -a $x/summary.txt; }
rm -rf $W $BASE && mkdir -p $W $BASE
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $BASE
if (cd $W && git apply --check $patch 2>/dev/null); then
    (cd $W && git apply $patch) && say "bm192 patch applied to $W"
elif (cd $BASE && git apply -R --check $patch 2>/dev/null); then
    (cd $BASE && git apply -R $patch) && say "tree already has the bm192 patch: reverted in $BASE"
else
    say "bm192 patch neither applies nor reverts: stop"
    exit 1
fi
VARS="base new"

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
print("ours TF/s per run (" + " ".join(f"{v}{r}" for v, r in runs) + "; - = not run), new / base per round "
      "(mean), new's /FA2 and /cuDNN (mean over rounds), base's /FA2:")
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
    for d in sorted({p[0] for p, _ in g}):
        c = [q for p, q in g if p[0] == d and p[2] == "yes"]
        f = [q for p, q in g if p[0] == d and p[2] == "no"]
        print(f"D={d} {v}/base geomean: " + (f"causal {geo(c):.3f}" if c else "") + (f", full {geo(f):.3f}" if f else "")
              + f" ({len(c) + len(f)} points)")
EOF
}

bench() { # bench VAR ROUND DLIST
    (cd bench && timeout 100 python3 attention_side_by_side.py --lib $L/$1.so --d $3 --ops fwd \
        --causal both --s 2048,4096,8192,16384 --reps 10) >$x/bench_$1_$2.txt 2>&1
    echo "bench $1 round $2 (D $3) rc=$? at $(at)" >>$x/summary.txt
}

if [ "$DRY" = 1 ]; then # local check: the summary on made-up bench output (round 1 with D = 128 too)
    for rd in 1 2 3; do
        for v in $VARS; do
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + length(v)); print "PyTorch 2.x on made-up GPU"
                printf "%-7s %4s %6s %-6s %9s %7s %7s %6s %7s\n", "op", "D", "S", "causal", "ours TF/s", "FA2", "cuDNN", "/FA2", "/cuDNN"
                nd = rd == 1 ? 2 : 1; split("64 128", ds, " "); split("2048 4096 8192 16384", ss, " ")
                for (i = 1; i <= nd; i++) for (j = 1; j <= 4; j++) for (c = 0; c < 2; c++) {
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
(cmake -S $W -B /tmp/bn10b $cfg >/dev/null && timeout 300 cmake --build /tmp/bn10b -j16 --target camel_shared test_gpu_attention) \
    >$x/build_new.log 2>&1 &
pn=$!
(cmake -S $BASE -B /tmp/bb10b $cfg >/dev/null && timeout 320 nice -n 10 cmake --build /tmp/bb10b -j16 --target camel_shared) \
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
    cp /tmp/bn10b/src/libcamel.so $L/new.so
    # on the GPU while base still builds: ohash of new, the forward test, the sanitizers
    timeout 60 python3 dev/attention_sm90/ohash.py --lib $L/new.so >$x/ohash_new.txt 2>&1
    ro=$?
    echo "ohash new rc=$ro at $(at): $(tail -1 $x/ohash_new.txt)" >>$x/summary.txt
    [ $ro -eq 124 ] && say "ohash new timed out (a hang?): no timing" && rn=8
    T=/tmp/bn10b/tests/test_gpu_attention
    (timeout 170 $T >$x/test.log 2>&1; echo "rc=$?" >>$x/test.log) &
    ps="$!"
    # the sanitizers beside the test, time-boxed so that the bench rounds keep ~240 s
    ts=$(($(left) - 240))
    [ $ts -gt 170 ] && ts=170
    if [ $ts -ge 30 ]; then
        filt=""
        compute-sanitizer --help 2>&1 | grep -q -- '--kernel-name' && filt="--kernel-name kns=att90_fwd"
        for tool in racecheck synccheck; do
            (CML_TEST_SANITIZER=1 timeout $ts compute-sanitizer --tool $tool $filt --error-exitcode 9 $T \
                >$x/san_$tool.txt 2>&1; echo "rc=$?" >>$x/san_$tool.txt) &
            ps="$ps $!"
        done
        say "test_gpu_attention (time box 170 s) + sanitizers racecheck, synccheck started at $(at), time box $ts s, filter '${filt:-none}'"
    else
        say "test_gpu_attention started at $(at); sanitizers not run: $(left) s left"
    fi
fi
wait $pb
rb=$?
say "base build rc=$rb at $(at); ptxas: $(c75 $x/build_base.log)"
[ $rb -eq 0 ] || tail -20 $x/build_base.log
cp /tmp/bb10b/src/libcamel.so $L/base.so 2>/dev/null
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    timeout 60 python3 dev/attention_sm90/ohash.py --lib $L/base.so >$x/ohash_base.txt 2>&1
    echo "ohash base rc=$? at $(at): $(tail -1 $x/ohash_base.txt)" >>$x/summary.txt
    if [ -s $x/ohash_base.txt ] && cmp -s <(grep '^B=' $x/ohash_base.txt) <(grep '^B=' $x/ohash_new.txt) &&
        [ "$(grep -c 'repeat ok' $x/ohash_new.txt)" -ge 13 ] && [ "$(grep -c 'nan 0 ' $x/ohash_new.txt)" -ge 13 ]; then
        say "O / lse bitwise: new equal to base on the $(grep -c '^B=' $x/ohash_new.txt) shapes, repeats equal, no NaN"
    else
        say "O / lse bitwise: new DIFFERENT from base or incomplete (ohash_*.txt):"
        diff <(grep '^B=' $x/ohash_base.txt) <(grep '^B=' $x/ohash_new.txt) | head -12 >>$x/summary.txt
    fi
fi
for p in $ps; do wait $p; done # the test and sanitizers (time-boxed) leave the GPU to the bench
[ -s $x/test.log ] && say "test_gpu_attention (new) $(tail -1 $x/test.log) at $(at): $(grep -cE '^ok' $x/test.log) ok lines; $(grep -E 'sm90 forward|FAIL|passed|failed' $x/test.log | tail -4 | tr '\n' ' ')"
for tool in racecheck synccheck; do
    [ -s $x/san_$tool.txt ] && say "sanitizer $tool (new) $(tail -1 $x/san_$tool.txt) (124: cut by the time box): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|sm90 forward' $x/san_$tool.txt | tr '\n' ' ' | cut -c1-300)"
done
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    round=1
    while [ $round -le $ROUNDS ]; do
        d=64
        need=50
        [ $round = 1 ] && d=64,128 && need=75
        [ "$(left)" -gt $((need + 10)) ] || break
        for v in $VARS; do bench $v $round $d; done
        round=$((round + 1))
    done
    summarize
fi
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
