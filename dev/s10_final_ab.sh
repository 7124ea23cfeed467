#!/bin/bash
# Session 10's last device call: up to two small patches against the unmodified tree, in ONE call.
# (Session 10, after the call: the GEMM epilogue patch landed in 04cd907 and the attention order patch was
# replaced by s10_order256_causal.patch; both patch files are gone, so this script is a record of the call.)
#   dev/attention_sm90/s10_order256.patch  the D = 256 causal forward in the longest-first order across
#                                          groups of heads (as D = 128's); D = 64 / 128 SASS unchanged
#   dev/gemm_sm90/session10_epilogue.patch the sm90 GEMM's TMA epilogue diet (helper h10c), if present
# Both trees built at once (base niced); on new: test_gpu_attention, test_gpu_gemm, ohash (attention O / lse
# bits vs base), dhash (GEMM D bits vs base); then base / new in turns: attention D = 256 forward (causal
# and full, 2k-16k) and `camel bench gemm --set gpt2`, ROUNDS rounds; memcheck of test_gpu_gemm with what
# is left. Summary printed last; logs in /tmp/x.
#   bash dev/s10_final_ab.sh; tar czf $OUT/logs.tgz -C /tmp/x .          (run: timeout_s 600)
set -u
T0=$(date +%s); LIMIT=${LIMIT:-560}; ROUNDS=${ROUNDS:-3}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=/tmp/x; W=/tmp/n10c; BASE=/tmp/b10c
rm -rf $x $W $BASE && mkdir -p $x $W $BASE
say() { echo "$*" | tee -a $x/summary.txt; }
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $BASE
PATCHES=""
for p in dev/attention_sm90/s10_order256.patch dev/gemm_sm90/session10_epilogue.patch; do
    [ -f $p ] || continue
    if (cd $W && git apply $p); then PATCHES="$PATCHES $p"; say "applied $p"; else say "$p does not apply: left out"; fi
done
[ -n "$PATCHES" ] || { say "no patch applied: stop"; exit 1; }
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B /tmp/bn $cfg >/dev/null && timeout 300 cmake --build /tmp/bn -j16 --target camel camel_shared camel_static test_gpu_gemm test_gpu_attention) >$x/build_new.log 2>&1 &
pn=$!
(cmake -S $BASE -B /tmp/bb $cfg >/dev/null && timeout 320 nice -n 10 cmake --build /tmp/bb -j16 --target camel camel_shared camel_static) >$x/build_base.log 2>&1 &
pb=$!
c75() { echo "$(grep -oE '\(C75[0-9]+\)|[1-9][0-9]* bytes spill' $1 | sort | uniq -c | tr '\n' ' ')"; }
wait $pn; rn=$?
say "new build rc=$rn at $(at); ptxas C75xx / spills: $(c75 $x/build_new.log)"
[ $rn -eq 0 ] || tail -20 $x/build_new.log
if grep -E 'att90_fwd|sm90' $x/build_new.log | grep -qE 'C7511|C7520|[1-9][0-9]* bytes spill'; then  # not gemm_f32's old 16 B
    say "new build: C7511 / C7520 / spill in the forward or GEMM kernels: no timing"; rn=9
fi
if [ $rn -eq 0 ]; then
    (cd /tmp/bn && timeout 170 tests/test_gpu_attention >$x/test_att.log 2>&1; echo "rc=$?" >>$x/test_att.log) &
    pa=$!
    (cd /tmp/bn && timeout 100 tests/test_gpu_gemm >$x/test_gemm.log 2>&1; echo "rc=$?" >>$x/test_gemm.log) &
    pg=$!
fi
wait $pb; rb=$?
say "base build rc=$rb at $(at); ptxas C75xx / spills: $(c75 $x/build_base.log)"
dhash_link() {
    local blas; blas=$(sed -n 's/^CML_OPENBLAS_LIB:FILEPATH=//p' $1/CMakeCache.txt)
    nvcc -O2 -std=c++17 -arch=sm_90a -I$W/include $W/dev/gemm_sm90/dhash.cu $1/src/libcamel.a ${blas:+-Xlinker $blas} \
        -lz -lgomp -ldl -lrt -lpthread -o /tmp/dhash_$2
}
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    dhash_link /tmp/bn new >$x/dhash_link_new.log 2>&1; dhash_link /tmp/bb base >$x/dhash_link_base.log 2>&1
    wait $pa $pg
    say "test_gpu_attention (new): $(grep -E 'tests passed|FAIL' $x/test_att.log | tail -2 | tr '\n' ' ') $(tail -1 $x/test_att.log)"
    say "test_gpu_gemm (new): $(grep -E 'tests passed|FAIL' $x/test_gemm.log | tail -2 | tr '\n' ' ') $(tail -1 $x/test_gemm.log)"
    for v in base new; do
        timeout 40 /tmp/dhash_$v >$x/dhash_$v.txt 2>&1
        timeout 60 python3 dev/attention_sm90/ohash.py --lib /tmp/b$([ $v = new ] && echo n || echo b)/src/libcamel.so >$x/ohash_$v.txt 2>&1
    done
    nh=$(grep -c '^dhash' $x/dhash_new.txt 2>/dev/null)
    if [ -s $x/dhash_base.txt ] && cmp -s $x/dhash_base.txt $x/dhash_new.txt && [ "${nh:-0}" -ge 15 ] &&
        [ "$(grep -c 'repeat ok' $x/dhash_new.txt)" = "$nh" ]; then
        say "GEMM D bitwise: the $nh hashes (15 GPT-2, the rest epilogue kinds / NaN inputs) equal, repeats equal"
        grep '^dhash epi' $x/dhash_new.txt >>$x/summary.txt
    else say "GEMM D bitwise: DIFFERENT or incomplete"; diff $x/dhash_base.txt $x/dhash_new.txt | head -8 >>$x/summary.txt; fi
    if cmp -s <(grep '^B=' $x/ohash_base.txt) <(grep '^B=' $x/ohash_new.txt) && [ "$(grep -c 'repeat ok' $x/ohash_new.txt)" -ge 13 ]; then
        say "attention O / lse bitwise: 13 shapes equal, repeats equal, no NaN"
    else say "attention O / lse bitwise: DIFFERENT or incomplete"; diff <(grep '^B=' $x/ohash_base.txt) <(grep '^B=' $x/ohash_new.txt) | head -8 >>$x/summary.txt; fi
    round=1
    while [ $round -le $ROUNDS ] && [ "$(left)" -gt 70 ]; do
        for v in base new; do
            d=/tmp/b$([ $v = new ] && echo n || echo b)
            (cd bench && timeout 60 python3 attention_side_by_side.py --lib $d/src/libcamel.so --d 256 --ops fwd --causal both \
                --s 2048,4096,8192,16384 --reps 10) >$x/att_${v}_$round.txt 2>&1
            timeout 40 $d/apps/camel/camel bench gemm --dtype bf16 --set gpt2 --reps 30 >$x/gemm_${v}_$round.txt 2>&1
        done
        say "round $round done at $(at)"; round=$((round + 1))
    done
    s=$(($(left) - 5))
    if [ $s -gt 20 ]; then
        (cd /tmp/bn && CML_TEST_SANITIZER=1 timeout $s compute-sanitizer --tool memcheck tests/test_gpu_gemm) >$x/memcheck.log 2>&1
        say "memcheck test_gpu_gemm (new) rc=$? (box $s s): $(grep -E 'ERROR SUMMARY|tests passed' $x/memcheck.log | tail -2 | tr '\n' ' ')"
    fi
    python3 - $x >>$x/summary.txt <<'PY'
import glob, math, os, re, sys
x = sys.argv[1]
def att(f):
    r = {}
    for line in open(f):
        t = line.split()
        if len(t) == 9 and t[0] == "fwd" and t[3] in ("yes", "no"):
            r[(int(t[2]), t[3])] = (float(t[4]), float(t[6]))
    return r
def gemm(f):
    r = {}
    for line in open(f):
        line = re.sub(r" FLAG.*", "", line); t = line.split()
        if len(t) > 12 and t[1] == "gpt2" and t[9] == "sm90":
            r[t[2] + " " + "x".join(t[4:7])] = float(t[-2])
    return r
rounds = sorted({int(re.search(r"_(\d+)\.txt$", f).group(1)) for f in glob.glob(os.path.join(x, "att_new_*.txt"))})
for kind, load in (("attention D=256 fwd TF/s", att), ("gemm gpt2 ratio to cuBLAS", gemm)):
    pre = "att" if kind.startswith("att") else "gemm"
    data = {(v, r): load(os.path.join(x, f"{pre}_{v}_{r}.txt")) for v in ("base", "new") for r in rounds
            if os.path.exists(os.path.join(x, f"{pre}_{v}_{r}.txt"))}
    keys = sorted({k for d in data.values() for k in d}, key=str)
    print(f"{kind}: new / base per round (mean)" + ("; new /cuDNN" if pre == "att" else ""))
    logs = []
    for k in keys:
        q = [data[("new", r)][k][0] / data[("base", r)][k][0] if pre == "att" else data[("new", r)][k] / data[("base", r)][k]
             for r in rounds if k in data.get(("new", r), {}) and k in data.get(("base", r), {})]
        if not q: continue
        m = math.exp(sum(map(math.log, q)) / len(q)); logs.append(math.log(m))
        extra = ""
        if pre == "att":
            extra = " /cuDNN " + " ".join(f"{data[('new', r)][k][0] / data[('new', r)][k][1]:.3f}" for r in rounds if k in data.get(("new", r), {}))
        print(f"  {str(k):28s} " + " ".join(f"{v:.3f}" for v in q) + f" ({m:.3f})" + extra)
    if logs: print(f"  geomean new/base {math.exp(sum(logs) / len(logs)):.3f}")
PY
fi
say "patches:$PATCHES; done at $(at)"
cat $x/summary.txt
