#!/bin/bash
# Session 9 study (dev/gemm_sm90/README.md, "Plan (session 9 study): the consumer loop"): the consumers'
# instruction diet (session10_consumer_diet.patch) against base, in ONE device call. Run from the
# repository root of the lead's tree (the patch and this script are all it needs):
#   LIMIT=285 bash dev/gemm_sm90/consumer_probe.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# (run with timeout_s 300). PATCH=dev/gemm_sm90/session10_consumer_diet_locate.patch measures the diet
# plus the next tile's place found under the first k-block (README) instead of the diet alone.
# PATCH=dev/gemm_sm90/session10_epilogue.patch (session 10, h10c): the TMA epilogue's quad kinds (README);
# dhash then also prints 9 lines of other epilogue kinds and NaN / infinity inputs, which must match too. Trees: /tmp/base and /tmp/w are copies of this tree; the patch is applied
# to /tmp/w (or, if this tree already has it, reverted in /tmp/base). Both libraries build at once
# (camel, test_gpu_gemm and camel_static for the new tree; camel and camel_static for base; the base
# build niced). On the GPU, in turn: test_gpu_gemm (new) as soon as it is built; dhash (dhash.cu,
# linked against each build's libcamel.a) prints an FNV-1a hash of D for the 15 bf16 GPT-2 GEMMs in
# both builds, which must be equal line for line (bitwise equal D); `camel bench gemm --dtype bf16
# --set gpt2 --reps 30` base/new interleaved, ROUNDS rounds while time is left; compute-sanitizer
# memcheck on test_gpu_gemm (new) with what is left. Logs in /tmp/x; the summary (a table of ratios
# to cuBLAS, one column per run, and each run's geomean) is printed last.
# Locally (no GPU): DRY=1 W=/tmp/me_w BASE=/tmp/me_base X=/tmp/me_x bash dev/gemm_sm90/consumer_probe.sh
# checks that the patch applies and the summary code on made-up bench files (W, BASE, X: the trees and
# the log folder, /tmp/w, /tmp/base, /tmp/x by default; the build folders are /tmp/bn and /tmp/bb).
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-285}
ROUNDS=${ROUNDS:-3}
DRY=${DRY:-0}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=${X:-/tmp/x}
W=${W:-/tmp/w}
BASE=${BASE:-/tmp/base}
mkdir -p $x
: >$x/summary.txt
patch=${PATCH:-dev/gemm_sm90/session10_consumer_diet.patch}
echo "patch: $patch" >>$x/summary.txt
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
summarize() { # the ratio table from $x/bench_{base,new}_ROUND.txt (names relative to $x: see the awk)
    local files
    cd $x || return
    files=$(ls bench_*.txt 2>/dev/null | sort -t_ -k3,3n -k2,2)
    [ -n "$files" ] || { echo "no bench output" >>$x/summary.txt; return; }
    echo "ratio to cuBLAS per case; columns: $(for f in $files; do basename $f .txt | sed 's/bench_//'; done | tr '\n' ' ')" >>$x/summary.txt
    # path ("sm90 RxWxS cC") is two fields, so M N K are $5-$7 and ratio, rel diff the last two
    awk 'FNR == 1 { nf++ } { sub(/ FLAG.*/, "") } $2 == "gpt2" && $10 == "sm90" { k = $3 " " $5 "x" $6 "x" $7
             if (!(k in seen)) { seen[k] = 1; order[++n] = k }
             r[k, nf] = $(NF - 1); lg[nf] += log($(NF - 1)); cnt[nf]++ }
         END { for (i = 1; i <= n; i++) { line = sprintf("%-26s", order[i]); for (j = 1; j <= nf; j++) line = line " " r[order[i], j]; print line }
               line = sprintf("%-26s", "geomean (" cnt[1] " cases)"); for (j = 1; j <= nf; j++) line = line " " (cnt[j] ? sprintf("%.3f", exp(lg[j] / cnt[j])) : "-"); print line }' \
        $files >>$x/summary.txt
    # new / base per round (same case, same round), then the mean over rounds
    awk 'FNR == 1 { split(FILENAME, p, "_"); v = p[2]; sub(/\.txt$/, "", p[3]); rd = p[3]; rounds[rd] = 1 }
         { sub(/ FLAG.*/, "") } $2 == "gpt2" && $10 == "sm90" { k = $3 " " $5 "x" $6 "x" $7; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
             r[k, v, rd] = $(NF - 1) }
         END { print "new / base per round (then mean):"
               for (i = 1; i <= n; i++) { line = sprintf("%-26s", order[i]); s = 0; c = 0
                   for (rd = 1; rd <= 9; rd++) if ((order[i], "base", rd) in r && (order[i], "new", rd) in r) {
                       q = r[order[i], "new", rd] / r[order[i], "base", rd]; line = line sprintf(" %.3f", q); s += log(q); c++ }
                   if (c) line = line sprintf("   mean %.3f", exp(s / c)); print line } }' \
        $files >>$x/summary.txt
    echo "rel diff to cuBLAS (the same in base and new if D is unchanged), round 1:" >>$x/summary.txt
    awk '{ sub(/ FLAG.*/, "") } $2 == "gpt2" && $10 == "sm90" { d[FILENAME] = d[FILENAME] " " $NF }
         END { for (f in d) print f ":" d[f] }' bench_*_1.txt 2>/dev/null | sort | sed 's#^bench_##' >>$x/summary.txt
    cd - >/dev/null
}
if [ "$DRY" = 1 ]; then # local check of the summary on made-up bench output (no build, no GPU)
    for rd in 1 2; do
        for v in base new; do
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + (v == "new"));
                printf "%-5s %-8s %-15s %-10s %6s %6s %6s %5s %-3s %-16s %9s %9s %9s %7s %9s\n", "dtype", "set", "op", "name", "M", "N", "K", "batch", "ops", "path", "ours ms", "ours TF/s", "ref TF/s", "ratio", "rel diff"
                split("8192 2304 768|8192 768 2304|2304 768 8192", c, "|")
                for (i = 1; i <= 3; i++) { split(c[i], s, " ")
                    printf "%-5s %-8s %-15s %-10.10s %6d %6d %6d %5d %c%c  %-16s %9s %9s %9s %7.3f %9s\n", "bf16", "gpt2", "gpt2_fwd", "attn_qkv", s[1], s[2], s[3], 1, "N", "T", "sm90 128x192x1 c1", "0.0490", "600.0", "640.0", 0.9 + rand() / 10, "1.9e-03" } }' \
                >$x/bench_${v}_$rd.txt
        done
    done
    summarize
    cat $x/summary.txt
    exit 0
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B /tmp/bn $cfg >/dev/null && timeout 200 cmake --build /tmp/bn -j16 --target camel test_gpu_gemm camel_static) \
    >$x/build_new.log 2>&1 &
pn=$!
(cmake -S $BASE -B /tmp/bb $cfg >/dev/null && timeout 215 nice -n 10 cmake --build /tmp/bb -j16 --target camel camel_static) \
    >$x/build_base.log 2>&1 &
pb=$!
dhash_link() { # build dir -> /tmp/dhash_NAME (nvcc links the static CUDA runtime the library expects)
    local blas
    blas=$(sed -n 's/^CML_OPENBLAS_LIB:FILEPATH=//p' $1/CMakeCache.txt)
    nvcc -O2 -std=c++17 -arch=sm_90a -I$W/include $W/dev/gemm_sm90/dhash.cu $1/src/libcamel.a ${blas:+-Xlinker $blas} \
        -lz -lgomp -ldl -lrt -lpthread -o /tmp/dhash_$2
}
wait $pn
rn=$?
echo "new build rc=$rn at $(at)" | tee -a $x/summary.txt
[ $rn -eq 0 ] || tail -20 $x/build_new.log
if [ $rn -eq 0 ]; then
    (dhash_link /tmp/bn new >$x/dhash_link_new.log 2>&1) &
    pdn=$!
    (cd /tmp/bn && timeout 100 tests/test_gpu_gemm) >$x/test.log 2>&1
    echo "test_gpu_gemm (new) rc=$? at $(at): $(grep -E 'passed|failed|FAIL' $x/test.log | tail -3 | tr '\n' ' ')" | tee -a $x/summary.txt
    wait $pdn
fi
wait $pb
rb=$?
echo "base build rc=$rb at $(at)" | tee -a $x/summary.txt
[ $rb -eq 0 ] || tail -20 $x/build_base.log
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
    nh=$(grep -c '^dhash' $x/dhash_new.txt 2>/dev/null)
    if [ -s $x/dhash_base.txt ] && cmp -s $x/dhash_base.txt $x/dhash_new.txt && [ "${nh:-0}" -ge 15 ] &&
        [ "$(grep -c 'repeat ok' $x/dhash_new.txt)" = "$nh" ]; then
        echo "D bitwise: the $nh hashes (15 GPT-2, the rest epilogue kinds / NaN) equal in base and new, repeats equal" |
            tee -a $x/summary.txt
        grep '^dhash epi' $x/dhash_new.txt >>$x/summary.txt
    else
        echo "D bitwise: DIFFERENT or incomplete (see dhash_*.txt):" | tee -a $x/summary.txt
        diff $x/dhash_base.txt $x/dhash_new.txt | head -20 >>$x/summary.txt
    fi
fi
bench() { # name binary
    local f=$x/bench_$1_$round.txt
    timeout 40 $2 bench gemm --dtype bf16 --set gpt2 --reps 30 --commit $1 >$f 2>&1
    echo "bench $1 round $round rc=$? at $(at)" >>$x/summary.txt
}
round=1
while [ $rn -eq 0 ] && [ $rb -eq 0 ] && [ "$(left)" -gt 55 ] && [ $round -le $ROUNDS ]; do
    bench base /tmp/bb/apps/camel/camel
    bench new /tmp/bn/apps/camel/camel
    round=$((round + 1))
done
s=$(($(left) - 5))
if [ $rn -eq 0 ] && [ $s -gt 20 ]; then
    (cd /tmp/bn && CML_TEST_SANITIZER=1 timeout $s compute-sanitizer --tool memcheck tests/test_gpu_gemm) >$x/memcheck.log 2>&1
    echo "memcheck (new) rc=$? (timeout $s s): $(grep -E 'ERROR SUMMARY|passed|failed' $x/memcheck.log | tail -3 | tr '\n' ' ')" >>$x/summary.txt
else
    echo "memcheck: no time left ($s s)" >>$x/summary.txt
fi
summarize
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
