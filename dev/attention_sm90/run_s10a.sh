#!/bin/bash
# Session 10, helper h10a (README "Session 10 (helper h10a)"): two dQ accumulation chains in the attention
# backward (s10a_dq_chains.patch) against the unmodified library, in ONE device call. Run from the repository
# root of the lead's tree (the patch and this script are all it needs):
#   bash dev/attention_sm90/run_s10a.sh; tar czf $OUT/logs.tgz -C /tmp/x .        (run with timeout_s 600)
# Steps: two copies of this tree (/tmp/w10a: patched, /tmp/b10a: base; if this tree already has the patch it
# is reverted in the base copy), both built at once (new: camel_shared + test_gpu_attention_bwd90 +
# test_gpu_attention; base: camel_shared, niced); every ptxas C75xx / spill line of the backward (att90b)
# counted per build (new must have base's C75xx lines and no spill, else no timing); on new, while base still
# builds and all at once: test_gpu_attention_bwd90 (the library's rule: two chains from S_kv = 4096) and again
# with CML_ATT_BWD_DQ_CHAINS=2 (every case through two chains), test_gpu_attention with CML_ATT_BWD_DQ_CHAINS=2,
# compute-sanitizer racecheck + synccheck of test_gpu_attention_bwd90 at D = 128 and 256
# (CML_TEST_SANITIZER=1, CML_ATT_BWD_DQ_CHAINS=2; 150 s each); then bwd_chains_ab.py base vs new (dK, dV
# bitwise equal, dQ close where new ran two chains, bitwise where one) with the rule and with
# CML_ATT_BWD_DQ_CHAINS=1 (everything bitwise equal: the one-chain path unchanged); then
# bench/attention_side_by_side.py --d 256,128,64 --ops fwd_bwd --causal both --s 2048,4096,8192,16384
# --reps 10 ROUNDS (2) times per library in turns (base, new, new2), new2 = new with CML_ATT_BWD_DQ_CHAINS=2
# at S = 2048 only (where the rule keeps one chain: what two would cost there).
# The summary (printed last, also /tmp/x/summary.txt): per point ours TF/s per run, new / base per round and
# its mean, new's /cuDNN and base's /cuDNN (means over rounds), new2 / base at S = 2048.
# Locally (no GPU): DRY=1 W=/tmp/me_w BASE=/tmp/me_b X=/tmp/me_x bash dev/attention_sm90/run_s10a.sh checks
# that the patch applies and the summary on made-up bench output.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-560}
ROUNDS=${ROUNDS:-2}
DRY=${DRY:-0}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=${X:-/tmp/x}
W=${W:-/tmp/w10a}
BASE=${BASE:-/tmp/b10a}
R=$(pwd)
patch=dev/attention_sm90/s10a_dq_chains.patch
mkdir -p $x /tmp/libs10a
: >$x/summary.txt
say() { echo "$*" | tee -a $x/summary.txt; }
rm -rf $W $BASE && mkdir -p $W $BASE
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $BASE
if (cd $W && git apply --check $patch 2>/dev/null); then
    (cd $W && git apply $patch) && say "chains patch applied to $W"
elif (cd $BASE && git apply -R --check $patch 2>/dev/null); then
    (cd $BASE && git apply -R $patch) && say "tree already has the chains patch: reverted in $BASE"
else
    say "chains patch neither applies nor reverts: stop"
    exit 1
fi
VARS="base new new2"

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
        if len(t) == 9 and t[0] == "fwd_bwd" and t[3] in ("yes", "no"):
            rows[(int(t[1]), int(t[2]), t[3])] = tuple(map(float, t[4:7]))
    data[(m.group(1), int(m.group(2)))] = rows
if not data:
    print("no bench output"); sys.exit()
rounds = sorted({r for _, r in data})
pts = sorted({p for rows in data.values() for p in rows}, key=lambda p: (-p[0], p[2], p[1]))
runs = [(v, r) for r in rounds for v in vars_ if (v, r) in data]
geo = lambda q: math.exp(sum(map(math.log, q)) / len(q))
print("fwd_bwd, ours TF/s per run (" + " ".join(f"{v}{r}" for v, r in runs) + "), X / base per round (mean), "
      "X's /cuDNN and base's /cuDNN (means over rounds):")
gm = {v: [] for v in vars_[1:]}
for p in pts:
    line = f"D={p[0]:<3} S={p[1]:<5} {'causal' if p[2] == 'yes' else 'full  '}"
    line += " " + " ".join(f"{data[k][p][0]:6.1f}" if p in data[k] else "     -" for k in runs)
    for v in vars_[1:]:
        q = [data[(v, r)][p][0] / data[("base", r)][p][0] for r in rounds
             if p in data.get((v, r), {}) and p in data.get(("base", r), {})]
        if q:
            gm[v].append((p, geo(q)))
            line += f" | {v}/base " + " ".join(f"{a:.3f}" for a in q) + f" ({geo(q):.3f})"
        f = [data[(v, r)][p] for r in rounds if p in data.get((v, r), {})]
        if f and v == "new":
            line += f" /cuDNN {sum(a[0] / a[2] for a in f) / len(f):.3f}"
    b = [data[("base", r)][p] for r in rounds if p in data.get(("base", r), {})]
    if b:
        line += f" | base /cuDNN {sum(a[0] / a[2] for a in b) / len(b):.3f}"
    print(line)
for v, g in gm.items():
    for d in sorted({p[0] for p, _ in g}, reverse=True):
        c = [q for p, q in g if p[0] == d and p[2] == "yes"]
        f = [q for p, q in g if p[0] == d and p[2] == "no"]
        big = [q for p, q in g if p[0] == d and p[1] >= 4096]
        print(f"{v}/base D={d} geomean:" + (f" causal {geo(c):.3f}" if c else "") + (f", full {geo(f):.3f}" if f else "")
              + (f", S >= 4096 {geo(big):.3f}" if big else "") + f" ({len(c) + len(f)} points)")
EOF
}

if [ "$DRY" = 1 ]; then # local check: the summary on made-up bench output
    for rd in 1 2; do
        for v in $VARS; do
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + length(v)); print "PyTorch 2.x on made-up GPU"
                printf "%-7s %4s %6s %-6s %9s %7s %7s %6s %7s\n", "op", "D", "S", "causal", "ours TF/s", "FA2", "cuDNN", "/FA2", "/cuDNN"
                split("256 128 64", ds, " "); split("2048 4096 8192 16384", ss, " ")
                for (i = 1; i <= 3; i++) for (j = 1; j <= (v == "new2" ? 1 : 4); j++) for (c = 0; c < 2; c++) {
                    o = 380 + 50 * rand(); f = 262; u = 400
                    printf "%-7s %4d %6d %-6s %9.1f %7.1f %7.1f %6.3f %7.3f\n", "fwd_bwd", ds[i], ss[j], c ? "yes" : "no", o, f, u, o / f, o / u } }' \
                >$x/bench_${v}_$rd.txt
        done
    done
    summarize
    cat $x/summary.txt
    exit 0
fi

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B /tmp/bn10a $cfg >/dev/null &&
    timeout 300 cmake --build /tmp/bn10a -j16 --target camel_shared test_gpu_attention_bwd90 test_gpu_attention) \
    >$x/build_new.log 2>&1 &
pn=$!
(cmake -S $BASE -B /tmp/bb10a $cfg >/dev/null && timeout 320 nice -n 10 cmake --build /tmp/bb10a -j16 --target camel_shared) \
    >$x/build_base.log 2>&1 &
pb=$!
c75() { # the ptxas C75xx / spill lines of the attention backward (att90b kernels) in a build log, by code
    grep att90b $1 | grep -oE '\(C75[0-9]+\)|[1-9][0-9]* bytes spill' | sort | uniq -c | tr '\n' ' '
}
wait $pn
rn=$?
say "new build rc=$rn at $(at); backward ptxas: $(c75 $x/build_new.log)"
[ $rn -eq 0 ] || tail -20 $x/build_new.log
T=/tmp/bn10a/tests
pids=""
if [ $rn -eq 0 ]; then
    cp /tmp/bn10a/src/libcamel.so /tmp/libs10a/new.so
    # on the GPU while base still builds, all at once (correctness only; nothing is timed meanwhile)
    (timeout 200 $T/test_gpu_attention_bwd90 >$x/test_bwd90.log 2>&1; echo "rc=$?" >>$x/test_bwd90.log) &
    pids="$pids $!"
    (CML_ATT_BWD_DQ_CHAINS=2 timeout 200 $T/test_gpu_attention_bwd90 >$x/test_bwd90_c2.log 2>&1
        echo "rc=$?" >>$x/test_bwd90_c2.log) &
    pids="$pids $!"
    (CML_ATT_BWD_DQ_CHAINS=2 timeout 200 $T/test_gpu_attention >$x/test_att_c2.log 2>&1; echo "rc=$?" >>$x/test_att_c2.log) &
    pids="$pids $!"
    for d in 128 256; do
        for tool in racecheck synccheck; do
            (CML_ATT_BWD_DQ_CHAINS=2 CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=$d timeout 150 compute-sanitizer --tool $tool \
                --error-exitcode 9 $T/test_gpu_attention_bwd90 >$x/san_${tool}_$d.log 2>&1
                echo "rc=$?" >>$x/san_${tool}_$d.log) &
            pids="$pids $!"
        done
    done
fi
wait $pb
rb=$?
say "base build rc=$rb at $(at); backward ptxas: $(c75 $x/build_base.log)"
[ $rb -eq 0 ] || tail -20 $x/build_base.log
cp /tmp/bb10a/src/libcamel.so /tmp/libs10a/base.so 2>/dev/null
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then # base vs new, with the tests (correctness only)
    (timeout 120 python3 dev/attention_sm90/bwd_chains_ab.py /tmp/libs10a/base.so /tmp/libs10a/new.so \
        >$x/ab_rule.log 2>&1) &
    pids="$pids $!"
    (CML_ATT_BWD_DQ_CHAINS=1 timeout 120 python3 dev/attention_sm90/bwd_chains_ab.py /tmp/libs10a/base.so \
        /tmp/libs10a/new.so >$x/ab_c1.log 2>&1) &
    pids="$pids $!"
fi
[ -n "$pids" ] && wait $pids
say "tests and base vs new done at $(at)"
if [ $rn -eq 0 ]; then
    tl() { # one test log in a line: rc, the sm90 / determinism lines, failures
        echo "$(grep -E '^rc=' $1 | tail -1) $(grep -E 'sm90 backward path|passed|failed' $1 | tail -2 | tr '\n' ' ')" \
            "$(grep -cE 'FAIL' $1) FAIL lines; $(grep -E 'determinism:' $1 | sed -E 's/.*\((B=[^)]*)\).*, ([0-9]+ outputs differed).*/\1: \2/' | tr '\n' ' ')"
    }
    say "test_gpu_attention_bwd90 (rule): $(tl $x/test_bwd90.log)"
    say "test_gpu_attention_bwd90 (CHAINS=2): $(tl $x/test_bwd90_c2.log)"
    say "test_gpu_attention (CHAINS=2): $(tl $x/test_att_c2.log)"
    for d in 128 256; do
        for tool in racecheck synccheck; do
            say "$tool D=$d (CHAINS=2): $(grep -E '^rc=' $x/san_${tool}_$d.log | tail -1)" \
                "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $x/san_${tool}_$d.log | tail -1)"
        done
    done
    grep -hE "FAIL|failed" $x/test_bwd90.log $x/test_bwd90_c2.log $x/test_att_c2.log | head -8 | cut -c1-220 >>$x/summary.txt
fi
if [ -f $x/ab_rule.log ]; then
    say "base vs new (rule): $(tail -1 $x/ab_rule.log)"
    grep -E "chains 2" $x/ab_rule.log | sed -E 's/, dK dV equal.*//' | head -8 >>$x/summary.txt
    grep -E "FAIL|Error|error" $x/ab_rule.log | head -4 | cut -c1-200 >>$x/summary.txt
    say "base vs new (CHAINS=1, all bitwise): $(tail -1 $x/ab_c1.log)"
    grep -E "FAIL|Error|error" $x/ab_c1.log | head -4 | cut -c1-200 >>$x/summary.txt
fi
c75only() { grep att90b $1 | grep -oE '\(C75[0-9]+\)' | sort | uniq -c | tr '\n' ' '; }
if [ $rn -eq 0 ] && [ $rb -eq 0 ] && [ "$(c75only $x/build_new.log)" != "$(c75only $x/build_base.log)" -o \
    -n "$(grep att90b $x/build_new.log | grep -E '[1-9][0-9]* bytes spill')" ]; then
    say "new build: C75xx lines differ from base or spills (not what was compiled locally): no timing"
    rn=9
fi
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    round=1
    while [ $round -le $ROUNDS ] && [ "$(left)" -gt 70 ]; do
        for v in base new new2; do
            lib=$v d="256,128,64" s=2048,4096,8192,16384 env=""
            [ $v = new2 ] && lib=new s=2048 env="CML_ATT_BWD_DQ_CHAINS=2"
            t=$(left)
            [ $t -gt 110 ] && t=110
            [ $t -lt 20 ] && break
            (cd bench && env $env timeout $t python3 attention_side_by_side.py --lib /tmp/libs10a/$lib.so --d $d \
                --ops fwd_bwd --causal both --s $s --reps 10) >$x/bench_${v}_$round.txt 2>&1
            echo "bench $v round $round rc=$? at $(at)" >>$x/summary.txt
        done
        round=$((round + 1))
    done
    summarize
fi
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
