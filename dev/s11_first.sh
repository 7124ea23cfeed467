#!/bin/bash
# Session 11, device call 1: session 10's untested HEAD + the D = 256 causal forward order patch, in ONE call.
#   base = this tree (HEAD), new = a copy with dev/attention_sm90/s11_order256.patch applied.
#   Both built at once (sm_90a, -Werror; new: every target, kept in build-s11n for call 2's ctest),
#   ohash (O / lse bits base vs new, D = 64 / 128 / 256 shapes), then base / new in turns: attention D = 256
#   forward causal + full 2k-16k, and fwd+bwd causal 4k / 8k, ROUNDS rounds; summary printed last.
#   [WITH_S10D=1] bash dev/s11_first.sh; tar czf $OUT/logs.tgz -C /tmp/x .          (run: timeout_s 600)
set -u
T0=$(date +%s); LIMIT=${LIMIT:-570}; ROUNDS=${ROUNDS:-3}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=/tmp/x; W=/tmp/n11; BN=build-s11n; BB=build-s11b
rm -rf $x $W && mkdir -p $x $W
say() { echo "$*" | tee -a $x/summary.txt; }
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
# W lies outside the repository: `git apply` run in a subdirectory of a repository skips (silently) every
# path outside that subdirectory -- session 11's first call ran base against base that way.
R=$(pwd); (cd $W && git apply $R/dev/attention_sm90/s11_order256.patch) && grep -q 'int GROUPED = 0' $W/src/kernels/cuda/attention/attention_fwd_sm90.cuh &&
    say "patch applied (checked in the source)" || { say "patch does not apply"; exit 1; }
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B $BN $cfg >/dev/null && timeout 330 cmake --build $BN -j16) >$x/build_new.log 2>&1 &
pn=$!
(cmake -S . -B $BB $cfg >/dev/null && timeout 330 nice -n 10 cmake --build $BB -j16 --target camel_shared) >$x/build_base.log 2>&1 &
pb=$!
if [ -n "${WITH_S10D:-}" ]; then  # the D = 256 backward harness builds of run_s10d.sh, on the side
    mkdir -p build-att $x/s10d
    for s in 2 3; do
        (timeout 300 nice -n 5 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=256 \
          -DSET=$s dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/h10d_$s > $x/s10d/nvcc$s.txt 2>&1
         echo "SET=$s built rc=$? at $(at)" >> $x/s10d/nvcc$s.txt) &
    done
fi
c75() { echo "$(grep -oE '\(C75[0-9]+\)|[1-9][0-9]* bytes spill' $1 | sort | uniq -c | tr '\n' ' ')"; }
wait $pn; rn=$?
say "new build rc=$rn at $(at); ptxas C75xx / spills: $(c75 $x/build_new.log); GROUPED kernels: $(grep -oE 'cml__att90_fwd_kernelILi[01]ELi256ELi80ELi2ELi1ELi1ELi1ELi[01]E' $x/build_new.log | sort -u | wc -l) (expect 4)"
[ $rn -eq 0 ] || tail -20 $x/build_new.log
if grep -E 'att90_fwd|sm90' $x/build_new.log | grep -qE 'C7511|C7520|[1-9][0-9]* bytes spill'; then
    say "new build: C7511 / C7520 / spill in the sm90 kernels: no timing"; rn=9
fi
wait $pb; rb=$?
say "base build rc=$rb at $(at); ptxas C75xx / spills: $(c75 $x/build_base.log)"
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    for v in base new; do
        d=$([ $v = new ] && echo $BN || echo $BB)
        timeout 90 python3 dev/attention_sm90/ohash.py --lib $d/src/libcamel.so >$x/ohash_$v.txt 2>&1
    done
    ns=$(grep -c '^B=' $x/ohash_new.txt)
    if cmp -s <(grep '^B=' $x/ohash_base.txt) <(grep '^B=' $x/ohash_new.txt) && [ "$(grep -c 'repeat ok' $x/ohash_new.txt)" = "$ns" ] && [ "$ns" -ge 17 ]; then
        say "attention O / lse bitwise: $ns shapes equal, repeats equal"
    else say "attention O / lse bitwise: DIFFERENT or incomplete ($ns shapes)"; diff <(grep '^B=' $x/ohash_base.txt) <(grep '^B=' $x/ohash_new.txt) | head -8 >>$x/summary.txt; fi
    round=1
    while [ $round -le $ROUNDS ] && [ "$(left)" -gt 80 ]; do
        for v in base new; do
            d=$([ $v = new ] && echo $BN || echo $BB)
            (cd bench && timeout 70 python3 attention_side_by_side.py --lib ../$d/src/libcamel.so --d 256 --ops fwd --causal both \
                --s 2048,4096,8192,16384 --reps 10) >$x/att_${v}_$round.txt 2>&1
            (cd bench && timeout 60 python3 attention_side_by_side.py --lib ../$d/src/libcamel.so --d 256 --ops fwd_bwd --causal yes \
                --s 2048,4096,8192 --reps 10) >$x/attfb_${v}_$round.txt 2>&1
        done
        say "round $round done at $(at)"; round=$((round + 1))
    done
    python3 - $x >>$x/summary.txt <<'PY'
import glob, math, os, re, sys
x = sys.argv[1]
def att(f, op):
    r = {}
    for line in open(f):
        t = line.split()
        if len(t) == 9 and t[0] == op and t[3] in ("yes", "no"):
            r[(int(t[2]), t[3])] = (float(t[4]), float(t[6]))
    return r
rounds = sorted({int(re.search(r"_(\d+)\.txt$", f).group(1)) for f in glob.glob(os.path.join(x, "att_new_*.txt"))})
for pre, op in (("att", "fwd"), ("attfb", "fwd_bwd")):
    data = {(v, r): att(os.path.join(x, f"{pre}_{v}_{r}.txt"), op) for v in ("base", "new") for r in rounds
            if os.path.exists(os.path.join(x, f"{pre}_{v}_{r}.txt"))}
    keys = sorted({k for d in data.values() for k in d}, key=str)
    print(f"D=256 {op}: new / base per round (geomean); then new / cuDNN, base / cuDNN per round")
    for k in keys:
        q = [data[("new", r)][k][0] / data[("base", r)][k][0] for r in rounds if k in data.get(("new", r), {}) and k in data.get(("base", r), {})]
        if not q: continue
        m = math.exp(sum(map(math.log, q)) / len(q))
        cn = " ".join(f"{data[('new', r)][k][0] / data[('new', r)][k][1]:.3f}" for r in rounds if k in data.get(("new", r), {}))
        cb = " ".join(f"{data[('base', r)][k][0] / data[('base', r)][k][1]:.3f}" for r in rounds if k in data.get(("base", r), {}))
        print(f"  {str(k):16s} " + " ".join(f"{v:.3f}" for v in q) + f" ({m:.3f})  new/cuDNN {cn}  base/cuDNN {cb}")
PY
    (CML_TEST_SANITIZER=1 timeout 120 $BN/tests/test_gpu_attention) >$x/att_sanmode.log 2>&1
    say "test_gpu_attention (new) in the sanitizer's short sweep, no tool: rc=$? $(grep -E 'tests passed|FAIL' $x/att_sanmode.log | tail -2 | tr '\n' ' ')"
    s=$(($(left) - 5))
    if [ $s -gt 40 ]; then
        (CML_TEST_SANITIZER=1 CML_TEST_ONLY=test_sm90_fwd timeout $s compute-sanitizer --tool racecheck --error-exitcode 9 $BN/tests/test_gpu_attention) >$x/racecheck_att.log 2>&1
        say "racecheck test_gpu_attention test_sm90_fwd (new) rc=$? (box $s s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|ok |FAIL' $x/racecheck_att.log | tail -3 | tr '\n' ' ')"
    fi
    if [ -n "${WITH_S10D:-}" ]; then
        wait
        SKIP_BUILD=1 X=$x/s10d DEADLINE=$(($(left) - 5)) bash dev/attention_sm90/run_s10d.sh > $x/s10d_summary.txt 2>&1
        say "run_s10d.sh done at $(at)"
    fi
fi
say "done at $(at)"
cat $x/summary.txt; [ -f $x/s10d_summary.txt ] && tail -45 $x/s10d_summary.txt
