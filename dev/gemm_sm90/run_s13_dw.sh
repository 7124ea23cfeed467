#!/bin/bash
# Session 13 A/B (helper h12f, dev/gemm_sm90/README.md, "Session 12 (helper h12f): the weight-gradient shapes"):
# the stream order for the GPT-2 weight gradients 3072x768x8192 and 768x3072x8192 (s13_dw.patch: each CTA 3/4
# of a 128 x 192 tile's K blocks, 128 CTAs instead of 96, a cut tile finished by a two-term sum; tuned-table
# rows CML_SM90_TUNED_STREAM) against today's library, in ONE device call from the repository root of the
# lead's tree (this script and the patch are all it needs; run with timeout_s 600):
#   bash dev/gemm_sm90/run_s13_dw.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# Steps: copies of this tree in /tmp/base and /tmp/w, the patch onto /tmp/w (or, if this tree already has it,
# off /tmp/base); both libraries built at once (new: camel, test_gpu_gemm, camel_static; base niced: camel,
# camel_static); ptxas C75xx / spill lines of the new build; test_gpu_gemm on new (forced stream cases against
# the float64 reference, repeats bitwise, and 3072x768x8192 through the table); dhash (dev/gemm_sm90/dhash.cu,
# 15 GPT-2 GEMMs, each run twice) in both: new must repeat bitwise on every line and differ from base only on
# the two stream shapes; then `camel bench gemm --dtype bf16 --set gpt2 --reps 30` base / new in turns
# (ROUNDS, default 3, while time is left): each run times ours and cuBLAS in turns, so every round has old,
# new and cuBLAS. dW shapes: 3072x768x8192, 768x3072x8192 (stream), 768x768x8192 and 2304x768x8192 (plans
# unchanged: controls), plus the fwd / dX shapes (controls). Summary LAST.
# Locally (no GPU): DRY=1 W=/tmp/s13_w BASE=/tmp/s13_base X=/tmp/s13_x bash dev/gemm_sm90/run_s13_dw.sh
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-555}
ROUNDS=${ROUNDS:-3}
DRY=${DRY:-0}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=${X:-/tmp/x}
W=${W:-/tmp/w}
BASE=${BASE:-/tmp/base}
patch=dev/gemm_sm90/s13_dw.patch
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
summarize() {
    if ls $x/bench_*_*.txt >/dev/null 2>&1; then
        echo "== camel bench gemm --set gpt2 (bf16), in turns: TF/s old / new / cuBLAS (cuBLAS: mean of both runs) per round; new speed / old (geomean of rounds); ratio to cuBLAS old -> new (mean); rel.diff vs cuBLAS old / new (max)" >>$x/summary.txt
        (cd $x && awk 'FNR == 1 { split(FILENAME, p, "_"); v = p[2]; sub(/\.txt$/, "", p[3]); rd = p[3] }
             { sub(/ FLAG.*/, "") }
             $2 == "gpt2" && NF >= 15 { k = $3 " " $5 "x" $6 "x" $7 " " $9; if (!(k in seen)) { seen[k] = 1; order[++n] = k; big[k] = ($5 >= 1024 || $6 >= 1024 || $7 >= 1024) }
                 tf[k, v, rd] = $(NF - 3); ref[k, v, rd] = $(NF - 2); rat[k, v, rd] = $(NF - 1); dif[k, v, rd] = $NF }
             END { for (i = 1; i <= n; i++) { k = order[i]; line = sprintf("%-36s", k); s = 0; c = 0; ro = 0; rn = 0; dmo = 0; dmn = 0
                       for (rd = 1; rd <= 9; rd++) if ((k, "base", rd) in tf && (k, "new", rd) in tf && tf[k, "base", rd] > 0 && tf[k, "new", rd] > 0) {
                           q = tf[k, "new", rd] / tf[k, "base", rd]; s += log(q); c++
                           line = line sprintf(" r%d %s/%s/%.1f", rd, tf[k, "base", rd], tf[k, "new", rd], (ref[k, "base", rd] + ref[k, "new", rd]) / 2)
                           ro += rat[k, "base", rd]; rn += rat[k, "new", rd]
                           if (dif[k, "base", rd] + 0 > dmo) dmo = dif[k, "base", rd] + 0
                           if (dif[k, "new", rd] + 0 > dmn) dmn = dif[k, "new", rd] + 0 }
                       if (!c) { print line " (incomplete)"; continue }
                       ro /= c; rn /= c; go += log(ro); gn += log(rn); ng++
                       if (big[k]) { if (!mo || ro < mino) mino = ro; if (!mo || rn < minn) minn = rn; mo = 1 }
                       printf "%s   new/old %.3f   ratio %.3f -> %.3f   rel.diff %.1e / %.1e%s\n", line, exp(s / c), ro, rn, dmo, dmn,
                           (dmn > 2 * dmo + 1e-3) ? "  NEW REL.DIFF HIGH" : "" }
                   if (ng) printf "GPT-2 bf16 geomean ratio to cuBLAS: old %.3f -> new %.3f (%d shapes); worst of shapes with a side >= 1024: old %.3f -> new %.3f\n", exp(go / ng), exp(gn / ng), ng, mino, minn }' bench_*_*.txt) >>$x/summary.txt
    fi
    if [ -s $x/dhash_new.txt ]; then
        echo "== D bits (dhash, 15 GPT-2 GEMMs + 9 epilogue lines): new repeats bitwise: $(grep -c 'repeat ok' $x/dhash_new.txt) of $(grep -c '^dhash' $x/dhash_new.txt) lines; lines that differ from base (expected: the two stream shapes only):" >>$x/summary.txt
        diff <(grep '^dhash' $x/dhash_base.txt) <(grep '^dhash' $x/dhash_new.txt) | grep '^>' | sed 's/^>/  /' >>$x/summary.txt
    fi
}
if [ "$DRY" = 1 ]; then # the summary on made-up output (no build, no GPU)
    for rd in 1 2; do
        for v in base new; do
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + (v == "new"))
                printf "%-5s %-8s %-15s %-10s %6s %6s %6s %5s %-3s %-16s %9s %9s %9s %7s %9s\n", "dtype", "set", "op", "name", "M", "N", "K", "batch", "ops", "path", "ours ms", "ours TF/s", "ref TF/s", "ratio", "rel diff"
                split("8192 768 768 NT|3072 768 8192 TN|768 3072 8192 TN|768 768 8192 TN|2304 768 8192 TN", c, "|")
                for (i = 1; i <= 5; i++) { split(c[i], s, " "); ours = 600 * (v == "new" && i == 2 ? 1.2 : 1) * (0.98 + rand() / 25); refv = 690
                    printf "%-5s %-8s %-15s %-10.10s %6d %6d %6d %5d %s  %-16s %9.3f %9.1f %9.1f %7.3f %9.2e%s\n", "bf16", "gpt2", i == 1 ? "gpt2_fwd" : "gpt2_dw", "mlp_fc", s[1], s[2], s[3], 1, s[4], "sm90 128x192x1 c1", 0.064, ours, refv, ours / refv, 1.9e-3 * (v == "new" && i == 2 ? 1.1 : 1), (i == 3 && v == "new" && rd == 2) ? " FLAG: outputs differ" : "" } }' \
                >$x/bench_${v}_$rd.txt
        done
    done
    printf 'dhash fwd 8192x768x768 NT 0123 repeat ok\ndhash dw 3072x768x8192 TN 4567 repeat ok\n' >$x/dhash_base.txt
    printf 'dhash fwd 8192x768x768 NT 0123 repeat ok\ndhash dw 3072x768x8192 TN 89ab repeat ok\n' >$x/dhash_new.txt
    summarize
    cat $x/summary.txt
    exit 0
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B /tmp/bn $cfg >/dev/null &&
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
    nvcc -O2 -std=c++17 -arch=sm_90a -I$W/include $W/dev/gemm_sm90/dhash.cu $1/src/libcamel.a ${blas:+-Xlinker $blas} \
        -lz -lgomp -ldl -lrt -lpthread -o /tmp/dhash_$2
}
if [ $rn -eq 0 ]; then
    grep -E "C75[0-9][0-9]|spill stores [1-9]|spill loads [1-9]" $x/build_new.log | sort | uniq -c | head -20 |
        sed 's/^/  new lib ptxas: /' >>$x/summary.txt
    echo "new lib ptxas: $(grep -cE 'C75[0-9][0-9]' $x/build_new.log) C75xx lines, $(grep -cE 'spill (stores|loads) [1-9]' $x/build_new.log) spill lines (base build, for comparison: see build_base.log)" >>$x/summary.txt
    (dhash_link /tmp/bn new >$x/dhash_link_new.log 2>&1) &
    pdn=$!
    t=$(($(left) - 230)); [ $t -gt 150 ] && t=150; [ $t -lt 40 ] && t=40
    (cd /tmp/bn && timeout $t tests/test_gpu_gemm) >$x/test.log 2>&1
    echo "test_gpu_gemm (new) rc=$? at $(at): $(grep -E 'stream|passed|failed|FAIL' $x/test.log | tail -4 | tr '\n' ' ')" | tee -a $x/summary.txt
    wait $pdn
fi
wait $pb
rb=$?
echo "base library build rc=$rb at $(at)" | tee -a $x/summary.txt
[ $rb -eq 0 ] || tail -20 $x/build_base.log
echo "base lib ptxas: $(grep -cE 'C75[0-9][0-9]' $x/build_base.log) C75xx lines, $(grep -cE 'spill (stores|loads) [1-9]' $x/build_base.log) spill lines" >>$x/summary.txt
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    dhash_link /tmp/bb base >$x/dhash_link_base.log 2>&1
    for v in base new; do
        if [ -x /tmp/dhash_$v ]; then
            timeout 40 /tmp/dhash_$v >$x/dhash_$v.txt 2>&1
            echo "dhash $v rc=$? at $(at)" >>$x/summary.txt
        else
            echo "dhash $v: not built ($(tail -2 $x/dhash_link_$v.log | tr '\n' ' '))" >>$x/summary.txt
        fi
    done
fi
bench() { # name binary
    local f=$x/bench_$1_$bround.txt
    timeout 50 $2 bench gemm --dtype bf16 --set gpt2 --reps 30 --commit $1 >$f 2>&1
    echo "bench $1 round $bround rc=$? at $(at)" >>$x/summary.txt
}
bround=1
while [ $rn -eq 0 ] && [ $rb -eq 0 ] && [ "$(left)" -gt 60 ] && [ $bround -le $ROUNDS ]; do
    if [ $((bround % 2)) -eq 1 ]; then
        bench base /tmp/bb/apps/camel/camel
        bench new /tmp/bn/apps/camel/camel
    else # the other order every second round
        bench new /tmp/bn/apps/camel/camel
        bench base /tmp/bb/apps/camel/camel
    fi
    bround=$((bround + 1))
done
summarize
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
