#!/bin/bash
# Session 13 (built by helper h12g in session 12; README "Session 12 (helper h12g): QSHIFT as its own kernel"):
# h12e's end-aligned D = 64 query tiles (QSHIFT, +3.0% at causal 1k in session 12) as a kernel instantiation of
# their own, taken by default only for causal D = 64 with S_q % 192 == 64 (1k, 4k, 16k); every other launch runs
# the unshifted kernels, SASS-identical to d275a3b's. ONE device call, from the repository root of the lead's tree:
#   bash dev/attention_sm90/run_s13_qshift.sh; tar czf $OUT/logs.tgz -C /tmp/x .        (run with timeout_s 600)
# base = the tree without dev/attention_sm90/s13_qshift.patch (reverted if the tree has it), new = with it.
# Steps: two copies (/tmp/w13q new, /tmp/b13q base) built at once (new: camel_shared + test_gpu_attention; base:
# camel_shared, niced); ptxas C75xx / spill lines of the forward (new: a C7511 / C7520 / spill there = no timing);
# sass_same.py on the two builds' attention_fwd_sm90 objects (the 8 old kernels must be identical, 2 QSHIFT kernels
# only in new); then test_gpu_attention (new, in full, time box TT = 300 s) and beside it ohash.py of new (all,
# --short, --qshift; by default and with CML_ATT_FWD_QSHIFT=1, which shifts S_q % 192 == 128 too) and of base
# (every line must be equal: the shift keeps every row's key tiles and arithmetic), and compute-sanitizer
# racecheck + synccheck on the sm90 forward group (CML_TEST_SANITIZER=1 CML_TEST_ONLY=test_sm90_fwd: the shapes up to
# 300 long, shifted ones 256 x 256 and 256 x 300 among them; only the att90_fwd kernels instrumented where the
# sanitizer has --kernel-name); after all of that (nothing else on the GPU) bench/attention_side_by_side.py --d 64
# --ops fwd --causal both --s 512,1024,2048,4096,16384 --reps 10 for base / new in turns (order alternating per
# round), ROUNDS (3) rounds as the time allows (at least 2 expected), LIMIT 560 s.
# Summary (printed LAST, also /tmp/x/summary.txt): ours TF/s per run, new / base per round and geomean, /FA2 of
# both per point; the QSHIFT points (causal 1k / 4k / 16k) and the unshifted ones (must be ~1.00) apart.
# Decide: land if causal 1k new / base >= 1.01 (h12e: 1.030), 4k / 16k >= 0.995, every other point within
# 0.99-1.01 (same SASS: noise), the test passes in full, sanitizers clean, ohash equal.
# Locally (no GPU): DRY=1 W=/tmp/q_w BASE=/tmp/q_b X=/tmp/q_x bash dev/attention_sm90/run_s13_qshift.sh checks that
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
W=${W:-/tmp/w13q}
BASE=${BASE:-/tmp/b13q}
L=/tmp/libs13q
patch=dev/attention_sm90/s13_qshift.patch
mkdir -p $x $L
: >$x/summary.txt
say() { echo "$*" | tee -a $x/summary.txt; }
rm -rf $W $BASE && mkdir -p $W $BASE
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $BASE
if (cd $W && git apply --check $patch 2>/dev/null); then
    (cd $W && git apply $patch) && say "s13_qshift patch applied to $W"
elif (cd $BASE && git apply -R --check $patch 2>/dev/null); then
    (cd $BASE && git apply -R $patch) && say "tree already has the s13_qshift patch: reverted in $BASE"
else
    say "s13_qshift patch neither applies nor reverts: stop"
    exit 1
fi
VARS="base new"
S_LIST=512,1024,2048,4096,16384

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
qshift = lambda p: p[0] == 64 and p[2] == "yes" and p[1] % 64 == 0 and p[1] % 192 == 64  # the default rule
print("ours TF/s per run (" + " ".join(f"{v}{r}" for v, r in runs) + "); new/base per round (geomean); "
      "/FA2 base -> new (means over rounds); * = QSHIFT taken by new:")
res = {}
for p in pts:
    line = f"{'*' if qshift(p) else ' '} D={p[0]:<3} S={p[1]:<5} {'causal' if p[2] == 'yes' else 'full  '}"
    line += " " + " ".join(f"{data[k][p][0]:6.1f}" if p in data[k] else "     -" for k in runs)
    q = [data[("new", r)][p][0] / data[("base", r)][p][0] for r in rounds
         if p in data.get(("new", r), {}) and p in data.get(("base", r), {})]
    fa2 = {}
    for v in vars_:
        f = [data[(v, r)][p] for r in rounds if p in data.get((v, r), {})]
        if f:
            fa2[v] = sum(a[0] / a[1] for a in f) / len(f)
    if q:
        res[p] = geo(q)
        line += " | new/base " + " ".join(f"{a:.3f}" for a in q) + f" ({geo(q):.3f})"
    line += " | /FA2 " + " -> ".join(f"{fa2[v]:.3f}" for v in vars_ if v in fa2)
    print(line)
tk = [g for p, g in res.items() if qshift(p)]
nt = [g for p, g in res.items() if not qshift(p)]
if tk:
    print(f"QSHIFT points (causal S % 192 == 64): new/base geomean {geo(tk):.3f}, min {min(tk):.3f}")
if nt:
    print(f"unshifted points (same SASS: noise): new/base geomean {geo(nt):.3f}, range {min(nt):.3f} - {max(nt):.3f}")
EOF
}

bench() { # bench VAR ROUND
    (cd bench && timeout 110 python3 attention_side_by_side.py --lib $L/$1.so --d 64 --ops fwd --causal both \
        --s $S_LIST --reps 10) >$x/bench_$1_$2.txt 2>&1
    echo "bench $1 round $2 rc=$? at $(at)" >>$x/summary.txt
}

if [ "$DRY" = 1 ]; then # local check: the summary on made-up bench output
    for rd in 1 2; do
        for v in $VARS; do
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + length(v)); print "PyTorch 2.x on made-up GPU"
                printf "%-7s %4s %6s %-6s %9s %7s %7s %6s %7s\n", "op", "D", "S", "causal", "ours TF/s", "FA2", "cuDNN", "/FA2", "/cuDNN"
                split("512 1024 2048 4096 16384", ss, " ")
                for (j = 1; j <= 5; j++) for (c = 0; c < 2; c++) {
                    o = 300 + 40 * rand(); f = 215; u = 337
                    printf "%-7s %4d %6d %-6s %9.1f %7.1f %7.1f %6.3f %7.3f\n", "fwd", 64, ss[j], c ? "yes" : "no", o, f, u, o / f, o / u } }' \
                >$x/bench_${v}_$rd.txt
        done
    done
    summarize
    cat $x/summary.txt
    exit 0
fi

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B /tmp/bn13q $cfg >/dev/null && timeout 300 cmake --build /tmp/bn13q -j16 --target camel_shared test_gpu_attention) \
    >$x/build_new.log 2>&1 &
pn=$!
(cmake -S $BASE -B /tmp/bb13q $cfg >/dev/null && timeout 320 nice -n 10 cmake --build /tmp/bb13q -j16 --target camel_shared) \
    >$x/build_base.log 2>&1 &
pb=$!
c75() { # the ptxas C75xx / spill lines of a build log by code: the attention forward's, then all
    echo "fwd: $(grep att90_fwd $1 | grep -oE '\(C75[0-9]+\)|[1-9][0-9]* bytes spill' | sort | uniq -c | tr '\n' ' ')" \
        "all: $(grep -oE '\(C75[0-9]+\)|[1-9][0-9]* bytes spill' $1 | sort | uniq -c | tr '\n' ' ')"
}
bad() { grep att90_fwd $1 | grep -E "C7511|C7520|[1-9][0-9]* bytes spill"; } # serialized / divergent wgmma, spills
ohash() { # ohash NAME LIB [ENV]: the three shape sets
    local set a
    for set in all short qshift; do
        a=""; [ $set != all ] && a=--$set
        env ${3:-} timeout 90 python3 dev/attention_sm90/ohash.py --lib $2 $a >$x/ohash_$1_$set.txt 2>&1
        echo "ohash $1 $set rc=$? at $(at): $(tail -1 $x/ohash_$1_$set.txt)" >>$x/summary.txt
    done
}
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
    cp /tmp/bn13q/src/libcamel.so $L/new.so
    # the whole test in its box, and beside it (the GPU is not timed until all of these end) the sanitizers on
    # the sm90 forward group and the ohash runs
    T=/tmp/bn13q/tests/test_gpu_attention
    tt=$TT # at least 240 s (the whole test needs more than 150); the bench gets what is left after it (>= 150 s
    # when the builds take <= 160 s; otherwise fewer rounds)
    [ $tt -gt $(($(left) - 150)) ] && tt=$(($(left) - 150))
    [ $tt -lt 240 ] && tt=240
    (timeout $tt $T >$x/test.log 2>&1; echo "rc=$?" >>$x/test.log) &
    ps="$!"
    filt=""
    compute-sanitizer --help 2>&1 | grep -q -- '--kernel-name' && filt="--kernel-name kns=att90_fwd"
    (for tool in racecheck synccheck; do
        CML_TEST_SANITIZER=1 CML_TEST_ONLY=test_sm90_fwd timeout $((tt / 2)) compute-sanitizer --tool $tool $filt \
            --error-exitcode 9 $T >$x/san_$tool.txt 2>&1
        echo "rc=$?" >>$x/san_$tool.txt
    done) &
    ps="$ps $!"
    say "test_gpu_attention (box $tt s) and racecheck, synccheck on test_sm90_fwd (box $((tt / 2)) s each, filter '${filt:-none}') started at $(at)"
    ohash new $L/new.so
    ohash q1 $L/new.so CML_ATT_FWD_QSHIFT=1
    grep -q 'rc=124' <(grep '^ohash new' $x/summary.txt) && say "ohash new timed out (a hang?): no timing" && rn=8
fi
wait $pb
rb=$?
say "base build rc=$rb at $(at); ptxas: $(c75 $x/build_base.log)"
[ $rb -eq 0 ] || tail -20 $x/build_base.log
cp /tmp/bb13q/src/libcamel.so $L/base.so 2>/dev/null
ob=$(find /tmp/bb13q -name attention_fwd_sm90.cu.o 2>/dev/null | head -1)
on=$(find /tmp/bn13q -name attention_fwd_sm90.cu.o 2>/dev/null | head -1)
if [ -n "$ob" ] && [ -n "$on" ]; then
    CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump) python3 dev/attention_sm90/sass_same.py \
        $ob $on >$x/sass_same.txt 2>&1
    say "SASS base vs new (attention_fwd_sm90): $(tail -1 $x/sass_same.txt); $(grep -c '^only in new' $x/sass_same.txt) only in new (the QSHIFT kernels: 2), $(grep -c '^DIFFERS' $x/sass_same.txt) differ"
else
    say "SASS check: attention_fwd_sm90.cu.o not found in /tmp/bb13q or /tmp/bn13q"
fi
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    for set in all short qshift; do
        a=""; [ $set != all ] && a=--$set
        timeout 90 python3 dev/attention_sm90/ohash.py --lib $L/base.so $a >$x/ohash_base_$set.txt 2>&1
        echo "ohash base $set rc=$? at $(at): $(tail -1 $x/ohash_base_$set.txt)" >>$x/summary.txt
        n=$(grep -c '^B=' $x/ohash_base_$set.txt)
        for v in new q1; do
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
if [ -s $x/test.log ]; then
    say "test_gpu_attention (new) $(tail -1 $x/test.log) (124: cut by the box) at $(at): $(grep -E 'tests passed' $x/test.log | tail -1)"
    grep -E 'sm90 forward|QSHIFT' $x/test.log | head -3 | tee -a $x/summary.txt
    grep -iE 'FAIL|failed' $x/test.log | head -6 | cut -c1-240 | tee -a $x/summary.txt
fi
for tool in racecheck synccheck; do
    [ -s $x/san_$tool.txt ] && say "sanitizer $tool (new, test_sm90_fwd) $(tail -1 $x/san_$tool.txt) (124: cut by the box): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|tests passed' $x/san_$tool.txt | tr '\n' ' ' | cut -c1-300)"
done
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    round=1
    order="$VARS"
    need=70 # s per round (two bench calls), the last round's measured once one has run
    while [ $round -le $ROUNDS ]; do
        [ "$(left)" -gt $need ] || break
        t1=$(date +%s)
        for v in $order; do bench $v $round; done
        need=$(($(date +%s) - t1 + 5))
        order=$(echo $order | awk '{for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : "")}')
        round=$((round + 1))
    done
    say "bench rounds run: $((round - 1)) (a point missing from a round: see bench_*.txt)"
    summarize
fi
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
