#!/bin/bash
# Session 12, helper h12d (dev/gemm_sm90/README.md, "Session 12 (helper h12d): tf32"): the f32 TMA-store epilogue
# for tf32 launches (s13_tf32.patch, compiled in only with -DCML_SM90_F32_TMA=1) against today's general epilogue,
# in ONE device call from the repository root of the lead's tree (the patch and this script are all it needs;
# run with timeout_s 600):
#   bash dev/gemm_sm90/run_s13_tf32.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# Trees: /tmp/base and /tmp/w are copies of this tree; the patch goes onto /tmp/w (or, if this tree already has
# it, comes off /tmp/base). Built at once: the patched library with -DCML_SM90_F32_TMA=1 (camel, test_gpu_gemm,
# camel_static) and the base library (camel, camel_static; niced). Then, on the GPU:
#  1. test_gpu_gemm of the new library (tf32 with f32 D now through TMA stores: dtypes, forced plans with splits
#     and clusters, 1024^3 NN / NT);
#  2. dhash_tf32 (dev/gemm_sm90/dhash_tf32.cu: squares, the 15 GPT-2 GEMMs, odd / batched shapes, 9 epilogue and
#     NaN / inf lines) in both libraries: base and new must print the same lines (D bitwise the same);
#  3. `camel bench gemm --dtype tf32 --set square,gpt2 --sizes 2048,4096,8192 --ops NN,NT` base / new in turns
#     (ROUNDS, default 2, more while time is left): squares NN (as the bench records them: B transposed into the
#     workspace first) and NT (no transpose: NN - NT is the transpose pass's cost), GPT-2 fwd NT / dX NN / dW TN.
# Logs in /tmp/x; the summary is printed LAST.
# Locally (no GPU): DRY=1 W=/tmp/s13_w BASE=/tmp/s13_base X=/tmp/s13_x bash dev/gemm_sm90/run_s13_tf32.sh
# checks that the patch applies and runs the summary code on made-up bench and dhash output.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-555}
ROUNDS=${ROUNDS:-2}
DRY=${DRY:-0}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=${X:-/tmp/x}
W=${W:-/tmp/w}
BASE=${BASE:-/tmp/base}
patch=dev/gemm_sm90/s13_tf32.patch
mkdir -p $x
: >$x/summary.txt
rm -rf $W $BASE && mkdir -p $W $BASE
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $BASE
if (cd $W && git apply --check $patch 2>/dev/null); then
    (cd $W && git apply $patch) && echo "patch applied to $W" | tee -a $x/summary.txt
elif (cd $BASE && git apply -R --check $patch 2>/dev/null); then
    (cd $BASE && git apply -R $patch) && echo "tree already patched: reverted in $BASE" | tee -a $x/summary.txt
else
    echo "patch neither applies nor reverts: stop" | tee -a $x/summary.txt
    exit 1
fi
BENCH_ARGS="bench gemm --dtype tf32 --set square,gpt2 --sizes 2048,4096,8192 --max-f32 8192 --ops NN,NT --reps 20"
summarize() {
    if ls $x/bench_*_*.txt >/dev/null 2>&1; then
        echo "== camel bench gemm tf32 (ratio = cuBLASLt ms / ours ms, same process): per round base -> new ratio; new speed / base speed (geomean of rounds)" >>$x/summary.txt
        (cd $x && awk 'FNR == 1 { split(FILENAME, p, "_"); v = p[2]; sub(/\.txt$/, "", p[3]); rd = p[3]; if (rd > nr) nr = rd }
             { sub(/ FLAG.*/, "") } $1 == "tf32" && $10 == "sm90" {
                 k = sprintf("%-8s %-10s %-16s %s", $3, $4, $5 "x" $6 "x" $7, $9); if (!(k in seen)) { seen[k] = 1; order[++n] = k }
                 r[k, v, rd] = $(NF - 1); ms[k, v, rd] = $(NF - 4); plan[k, v] = $11 " " $12 }
             END { for (i = 1; i <= n; i++) { k = order[i]; line = sprintf("%-42s", k); s = 0; c = 0
                       for (rd = 1; rd <= nr; rd++) if ((k, "base", rd) in r && (k, "new", rd) in r) {
                           q = ms[k, "base", rd] / ms[k, "new", rd]; line = line sprintf(" r%d %s->%s", rd, r[k, "base", rd], r[k, "new", rd]); s += log(q); c++
                           lb[k] += log(r[k, "base", rd]); ln[k] += log(r[k, "new", rd]); cn[k]++ }
                       if (c) line = line sprintf("   new/base %.3f", exp(s / c)); print line "   " plan[k, "new"] }
                   # geomeans of the ratio to cuBLAS: squares NN (the recorded case), squares NT, GPT-2 (15)
                   split("square NN|square NT|gpt2", grp, "|")
                   for (g = 1; g <= 3; g++) { gb = 0; gn = 0; m = 0
                       for (i = 1; i <= n; i++) { k = order[i]; if (!cn[k]) continue
                           split(k, f, " "); isq = f[1] == "gemm"; ops = f[4]
                           if ((g == 3 && !isq) || (g < 3 && isq && ops == substr(grp[g], 8))) { gb += lb[k] / cn[k]; gn += ln[k] / cn[k]; m++ } }
                       if (m) printf "geomean ratio to cuBLAS, %-9s (%2d cases): base %.3f  new %.3f\n", grp[g], m, exp(gb / m), exp(gn / m) }
                   # the transpose pass: squares NN vs NT of the same build (ms), per size
                   for (i = 1; i <= n; i++) { k = order[i]; split(k, f, " "); if (f[1] != "gemm" || f[4] != "NN") continue
                       k2 = k; sub(/NN$/, "NT", k2); if (!((k2, "new", 1) in ms)) continue
                       printf "NN - NT (the B transpose + its launch), %s: base %.4f - %.4f ms = %.1f%% of NN; new %.4f - %.4f ms = %.1f%%\n", f[3],
                           ms[k, "base", 1], ms[k2, "base", 1], 100 * (1 - ms[k2, "base", 1] / ms[k, "base", 1]),
                           ms[k, "new", 1], ms[k2, "new", 1], 100 * (1 - ms[k2, "new", 1] / ms[k, "new", 1]) } }' bench_*_*.txt) >>$x/summary.txt
    fi
}
if [ "$DRY" = 1 ]; then # the summary on made-up output (no build, no GPU)
    for rd in 1 2; do
        for v in base new; do
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + (v == "new"))
                printf "%-5s %-8s %-15s %-10s %6s %6s %6s %5s %-3s %-16s %9s %9s %9s %7s %9s\n", "dtype", "set", "op", "name", "M", "N", "K", "batch", "ops", "path", "ours ms", "ours TF/s", "ref TF/s", "ratio", "rel diff"
                split("gemm square 2048 2048 2048 NN|gemm square 2048 2048 2048 NT|gemm square 8192 8192 8192 NN|gemm square 8192 8192 8192 NT|gpt2_fwd attn_qkv 8192 2304 768 NT|gpt2_dx attn_qkv 8192 768 2304 NN|gpt2_dw attn_qkv 2304 768 8192 TN", c, "|")
                for (i = 1; i <= 7; i++) { split(c[i], s, " "); ms = 0.05 + rand() / 100; if (v == "new") ms *= 0.9
                    printf "%-5s %-8s %-15s %-10.10s %6d %6d %6d %5d %s  %-16s %9.4f %9s %9s %7.3f %9s\n", "tf32", s[1] == "gemm" ? "square" : "gpt2", s[1], s[2], s[3], s[4], s[5], 1, s[6], "sm90 128x256x1 c2", ms, "300.0", "330.0", 0.045 / ms, "7.8e-04" } }' \
                >$x/bench_${v}_$rd.txt
        done
    done
    printf 'dhash sq   square           NN 1x 2048x 2048x 2048 0123456789abcdef repeat ok\n' >$x/dhash_base.txt
    cp $x/dhash_base.txt $x/dhash_new.txt
    summarize
    cat $x/summary.txt
    exit 0
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B /tmp/bn $cfg "-DCMAKE_CUDA_FLAGS=-DCML_SM90_F32_TMA=1 -Xptxas=-v" >/dev/null &&
    timeout 330 nice -n 5 cmake --build /tmp/bn -j16 --target camel test_gpu_gemm camel_static) >$x/build_new.log 2>&1 &
pn=$!
(cmake -S $BASE -B /tmp/bb $cfg >/dev/null && timeout 340 nice -n 10 cmake --build /tmp/bb -j16 --target camel camel_static) \
    >$x/build_base.log 2>&1 &
pb=$!
wait $pn
rn=$?
echo "new library build rc=$rn at $(at)" | tee -a $x/summary.txt
[ $rn -eq 0 ] || tail -20 $x/build_new.log
dhash_link() { # build dir -> /tmp/dhash_NAME (nvcc links the static CUDA runtime the library expects)
    local blas
    blas=$(sed -n 's/^CML_OPENBLAS_LIB:FILEPATH=//p' $1/CMakeCache.txt)
    nvcc -O2 -std=c++17 -arch=sm_90a -I$W/include $W/dev/gemm_sm90/dhash_tf32.cu $1/src/libcamel.a ${blas:+-Xlinker $blas} \
        -lz -lgomp -ldl -lrt -lpthread -o /tmp/dhash_$2
}
if [ $rn -eq 0 ]; then
    echo "new lib ptxas: $(grep -cE 'C75[0-9][0-9]' $x/build_new.log) C75xx lines, $(grep -cE 'spill (stores|loads) [1-9]' $x/build_new.log) spill lines" >>$x/summary.txt
    grep -E "C75[0-9][0-9]|spill stores [1-9]|spill loads [1-9]" $x/build_new.log | sort | uniq -c | head -10 | sed 's/^/  /' >>$x/summary.txt
    # registers of the tf32 kernels (KIND 2) in the new build's ptxas -v output
    grep -A3 "Compiling entry function '_Z16gemm_sm90_kernelILi[0-9]*ELi[0-9]ELi2E" $x/build_new.log | grep -oE "Used [0-9]+ registers|[0-9]+ bytes spill stores" |
        sort | uniq -c | sed 's/^/  tf32 kernels: /' >>$x/summary.txt
    (dhash_link /tmp/bn new >$x/dhash_link_new.log 2>&1) &
    pdn=$!
    t=$(($(left) - 260)); [ $t -gt 150 ] && t=150; [ $t -lt 40 ] && t=40
    (cd /tmp/bn && timeout $t tests/test_gpu_gemm) >$x/test.log 2>&1
    echo "test_gpu_gemm (new, CML_SM90_F32_TMA=1) rc=$? at $(at): $(grep -E 'passed|failed|FAIL' $x/test.log | tail -3 | tr '\n' ' ')" | tee -a $x/summary.txt
    wait $pdn
fi
wait $pb
rb=$?
echo "base library build rc=$rb at $(at)" | tee -a $x/summary.txt
[ $rb -eq 0 ] || tail -20 $x/build_base.log
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    dhash_link /tmp/bb base >$x/dhash_link_base.log 2>&1
    quick=0; [ "$(left)" -lt 260 ] && quick=1 # the 8192^3 and lm_head lines take ~25 s a build
    for v in base new; do
        if [ -x /tmp/dhash_$v ]; then
            DHASH_QUICK=$quick timeout 90 /tmp/dhash_$v >$x/dhash_$v.txt 2>&1
            echo "dhash_tf32 $v (quick=$quick) rc=$? at $(at)" >>$x/summary.txt
        else
            echo "dhash_tf32 $v: not built ($(tail -2 $x/dhash_link_$v.log | tr '\n' ' '))" >>$x/summary.txt
        fi
    done
    nh=$(grep -c '^dhash' $x/dhash_new.txt 2>/dev/null)
    if [ -s $x/dhash_base.txt ] && cmp -s $x/dhash_base.txt $x/dhash_new.txt && [ "${nh:-0}" -ge 20 ] &&
        [ "$(grep -c 'repeat ok' $x/dhash_new.txt)" = "$nh" ]; then
        echo "D bitwise: the $nh dhash_tf32 lines equal in base and new, repeats equal" | tee -a $x/summary.txt
    else
        echo "D bitwise: DIFFERENT or incomplete ($nh lines; see dhash_*.txt):" | tee -a $x/summary.txt
        diff $x/dhash_base.txt $x/dhash_new.txt | head -10 >>$x/summary.txt
    fi
fi
bench() { # name binary
    local f=$x/bench_$1_$bround.txt
    timeout 60 $2 $BENCH_ARGS --commit $1 >$f 2>&1
    echo "bench $1 round $bround rc=$? at $(at)" >>$x/summary.txt
}
bround=1
while [ $rn -eq 0 ] && [ $rb -eq 0 ] && [ "$(left)" -gt 110 ] && { [ $bround -le $ROUNDS ] || [ "$(left)" -gt 150 ]; } && [ $bround -le 4 ]; do
    bench base /tmp/bb/apps/camel/camel
    bench new /tmp/bn/apps/camel/camel
    bround=$((bround + 1))
done
summarize
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
