#!/bin/bash
# Session 17 (prepared by session 16's helper h16p; nothing of it has run on a GPU yet): the persistent 128-key D = 256
# forward (cml__att90_fwd_p256_kernel, patch s17_d256p.patch: min(tiles, SMs) CTAs, the next tile's Q / K_0 / V_0 loaded
# under the current tile's last steps, O through one 32 KiB buffer the two consumers take in turn), chosen by
# CML_ATT_FWD_D256P=1 in one build against the one-tile 128-key kernel (unset / 0). Tests: test_sm90_fwd at D = 256
# with the switch on (all SMs; and CML_ATT_FWD_D256P_CTAS=2: many work tiles a CTA, every cross-tile handoff), off (a
# control), racecheck / synccheck with the switch on and 2 CTAs. Bench: side by side, D = 256 fwd, causal both, S 512-4k,
# off / on in turns, 3 rounds; the summary (on / off speedup = time off / time on per point and round, geomean, /FA2)
# is printed LAST. Rule (README "Session 16 (helper h16p)"): default on for a point if on/off >= 1.02 there and no
# point it would take measures < 0.99.
# ONE device call:  bash dev/attention_sm90/run_s17_d256p.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (timeout_s 600)
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-560}
ROUNDS=${ROUNDS:-3}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=/tmp/x W=/tmp/w17p B=/tmp/b17p
mkdir -p $x
: >$x/summary.txt
say() { echo "$*" | tee -a $x/summary.txt; }
rm -rf $W && mkdir -p $W && tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
# the patch is applied unless the tree has it already (a checkout where it was committed)
if grep -q cml__att90_fwd_p256_kernel $W/src/kernels/cuda/attention/attention_fwd_sm90.cuh; then
    say "tree already has the persistent D = 256 kernel: patch not applied"
else
    (cd $W && git apply dev/attention_sm90/s17_d256p.patch) || { say "patch does not apply"; exit 1; }
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
cmake -S $W -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >$x/configure.log 2>&1
timeout 300 cmake --build $B -j16 --target camel_shared test_gpu_attention >$x/build.log 2>&1
rc=$?
say "build rc=$rc at $(at); ptxas warnings: $(grep -c 'C751[12]\|C7520' $x/build.log) (C7511/C7512/C7520), att90 forward spills: $(grep -i spill $x/build.log | grep -c att90_fwd) (other kernels' spills are older)"
[ $rc = 0 ] || { tail -40 $x/build.log; exit 1; }
T=$B/tests/test_gpu_attention
E="CML_TEST_ONLY=test_sm90_fwd CML_TEST_SM90_D=256"
run_test() { # name, env..., [sanitizer tool]
    local n=$1; shift
    (env $E "$@" timeout 150 $T >$x/test_$n.log 2>&1; echo "rc=$?" >>$x/test_$n.log) &
}
run_test on CML_ATT_FWD_D256P=1
run_test on_ctas2 CML_ATT_FWD_D256P=1 CML_ATT_FWD_D256P_CTAS=2
run_test off CML_ATT_FWD_D256P=0
for tool in racecheck synccheck; do
    (env $E CML_ATT_FWD_D256P=1 CML_ATT_FWD_D256P_CTAS=2 CML_TEST_SANITIZER=1 timeout 200 \
        compute-sanitizer --tool $tool --error-exitcode 99 --report-api-errors no $T >$x/san_$tool.log 2>&1
        echo "rc=$?" >>$x/san_$tool.log) &
done
wait
for f in $x/test_*.log $x/san_*.log; do
    say "$(basename $f .log): $(tail -1 $f) $(grep -h 'tests passed\|SUMMARY\|persistent D = 256:' $f | tr '\n' ' ')"
done
say "tests done at $(at)"
bench_on=1
grep -q '^rc=0' $x/test_on.log || say "switch-on test failed (see test_on.log); hashes and bench still run unless it hung"
grep -q '^rc=124' $x/test_on.log && { bench_on=0; say "switch-on test timed out (a hang?): no hash / bench of the switch on"; }
# bit for bit: the persistent kernel computes the one-tile kernel's steps with the same masks in the same order, so O and
# lse must hash equal with the switch on and off (ohash.py's D = 256 shapes: the bench's 512 / 1k with 1,024 / 512 work
# tiles, so many tiles a CTA; odd sizes, S_q != S_kv both ways, GQA, rows without keys; non-D = 256 lines are controls)
for set_ in short d256s; do
    [ $bench_on = 0 ] && break
    for sw in 0 1; do
        (cd $W && CML_ATT_FWD_D256P=$sw timeout 60 python3 dev/attention_sm90/ohash.py --lib $B/src/libcamel.so --$set_) \
            >$x/ohash_${set_}_$sw.txt 2>&1
    done
    if [ -s $x/ohash_${set_}_0.txt ] && cmp -s $x/ohash_${set_}_0.txt $x/ohash_${set_}_1.txt; then
        say "ohash --$set_: on == off, $(grep -c 'repeat ok' $x/ohash_${set_}_1.txt) lines repeat ok, lines with NaN left $(grep -c 'nan [1-9]' $x/ohash_${set_}_1.txt)"
    else
        say "ohash --$set_: ON DIFFERS FROM OFF (or failed):"; diff $x/ohash_${set_}_0.txt $x/ohash_${set_}_1.txt | head -20 | tee -a $x/summary.txt
    fi
done
say "hashes done at $(at)"
for r in $(seq 1 $ROUNDS); do
    [ $(left) -lt 70 ] && { say "round $r skipped: $(left) s left"; break; }
    vs="off on"; [ $((r % 2)) = 0 ] && vs="on off"
    for v in $vs; do
        [ $v = on ] && [ $bench_on = 0 ] && continue
        sw=0; [ $v = on ] && sw=1
        (cd $W/bench && CML_ATT_FWD_D256P=$sw timeout 75 python3 attention_side_by_side.py --lib $B/src/libcamel.so \
            --d 256 --ops fwd --causal both --s 512,1024,2048,4096 --reps 10) >$x/bench_${v}_$r.txt 2>&1
        echo "bench $v round $r rc=$? at $(at)" >>$x/summary.txt
    done
done
python3 - $x <<'PY' | tee -a $x/summary.txt
import glob, math, os, re, sys
x = sys.argv[1]
data = {}
for f in glob.glob(os.path.join(x, "bench_*_*.txt")):
    m = re.match(r"bench_(on|off)_(\d+)\.txt$", os.path.basename(f))
    if not m: continue
    rows = {}
    for line in open(f):
        t = line.split()
        if len(t) == 9 and t[0] == "fwd" and t[3] in ("yes", "no"):
            rows[(int(t[1]), int(t[2]), t[3])] = tuple(map(float, t[4:9]))
    data[(m.group(1), int(m.group(2)))] = rows
rounds = sorted({r for _, r in data})
pts = sorted({p for rows in data.values() for p in rows}, key=lambda p: (p[2], p[1]))
geo = lambda q: math.exp(sum(map(math.log, q)) / len(q)) if q else float("nan")
us = lambda p, tf: 4.0 * (16384 // p[1]) * (2048 // p[0]) * p[1] ** 2 * p[0] * (0.5 if p[2] == "yes" else 1) / tf / 1e6
print("=== SUMMARY: persistent D = 256 (on) / one-tile 128-key (off): speedup = time off / time on, per round; geomean;")
print("    /FA2 and us (means over rounds). The switch takes causal S <= 4096 and full S <= 512 (elsewhere on = off: controls)")
allq = []
for p in pts:
    q = [data[("on", r)][p][0] / data[("off", r)][p][0] for r in rounds
         if p in data.get(("on", r), {}) and p in data.get(("off", r), {})]
    line = f"D={p[0]} S={p[1]:<5} {'causal' if p[2] == 'yes' else 'full  '} on/off " + " ".join(f"{v:.3f}" for v in q)
    line += f" | geomean {geo(q):.3f}"
    for v in ("off", "on"):
        f = [data[(v, r)][p] for r in rounds if p in data.get((v, r), {})]
        if f:
            line += f" | {v} /FA2 {sum(a[3] for a in f) / len(f):.3f} /cuDNN {sum(a[4] for a in f) / len(f):.3f} {sum(us(p, a[0]) for a in f) / len(f):.1f}us"
    print(line)
    if q and (p[2] == "yes" or p[1] <= 512): allq += [geo(q)]
print(f"geomean over the points the switch takes: {geo(allq):.3f}")
print("rule: default on where on/off >= 1.02, provided no point it would take is < 0.99")
PY
