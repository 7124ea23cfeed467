#!/bin/bash
# Session 12, helper h12b (dev/gemm_sm90/README.md, "Session 12 (helper h12b)"): candidate B of the session 11
# plan, the one-round epilogue of the 5-stage 192-wide ring (gemm_sm90_kernel's EPI1; s12b_epi1.patch),
# against today's three-round one, in ONE device call from the repository root of the lead's tree (the patch
# and this script are all it needs; run with timeout_s 600):
#   bash dev/gemm_sm90/run_s12b.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# Trees: /tmp/base and /tmp/w are copies of this tree; the patch goes onto /tmp/w (or, if this tree already
# has it, comes off /tmp/base). Built at once: the TN / NT / NN harnesses (dev/gemm_sm90/harness.cu,
# 192-wide 5-stage kernels only, old and new in the same binary), the patched library with
# -DCML_SM90_EPI1=1 (camel, test_gpu_gemm, camel_static) and the base library (camel, camel_static, niced).
# Then, on the GPU:
#  1. harness "ab" rounds (ROUNDS, default 3; round 1 while the libraries still build): per shape, D of old
#     and new compared bitwise and a repeat of new, then old / new / cuBLAS timed in turns (median of 30,
#     L2 flushed); the shapes with their library ops and plans: fwd 8192x768x768 NT g16, dX 8192x768x768 NN
#     g8, dW 3072x768x8192 and 768x3072x8192 TN g16; controls fwd 8192x768x3072 NT, dX 8192x768x3072 NN,
#     fwd 8192x2304x768 NT (6 tiles a CTA; the library runs it on 4 stages), 4096^3 NT at 192 / 5 stages
#     (the library runs it 256 wide: untouched), and fwd 8192x768x768 with clusters of 2 (bits only).
#  2. test_gpu_gemm of the new library (the one-round path in every 5-stage launch), then again with
#     CML_SM90_DEEP_192=all (every 192-wide 128-row launch on the 5-stage ring: 6-8 tiles a CTA too);
#  3. dhash (dev/gemm_sm90/dhash.cu: 15 GPT-2 GEMMs + 9 epilogue kinds / NaN lines) in both libraries,
#     by default and with CML_SM90_DEEP_192=all: base and new must be equal line for line;
#  4. `camel bench gemm --dtype bf16 --set gpt2 --reps 30` base / new in turns while time is left
#     (dW 768x768x8192 runs <128,6> split 3, c2: already one round, untouched; a control).
# Logs in /tmp/x; the summary is printed LAST.
# Locally (no GPU): DRY=1 W=/tmp/s12b_w BASE=/tmp/s12b_base X=/tmp/s12b_x bash dev/gemm_sm90/run_s12b.sh
# checks that the patch applies and runs the summary code on made-up harness and bench output.
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
patch=dev/gemm_sm90/s12b_epi1.patch
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
# harness cases: name M N K opa opb group_m cluster (ops as the library runs them: fwd NT, dX NN, dW TN)
CASES="fwd,8192,768,768,N,T,16,1 dX,8192,768,768,N,N,8,1 dW,3072,768,8192,T,N,16,1 dW,768,3072,8192,T,N,16,1
ctl-fwd,8192,768,3072,N,T,16,1 ctl-dX,8192,768,3072,N,N,8,1 ctl-fwd6,8192,2304,768,N,T,16,1
ctl-sq,4096,4096,4096,N,T,16,1 fwd-c2,8192,768,768,N,T,16,2"
hrun() { # round: every case once, "ab" mode, appended to $x/harness.log with the round and case name
    local c
    for c in $CASES; do
        set -- ${c//,/ }
        local bin=$x/h_$5$6
        [ -x $bin ] || { echo "r$round $1 no harness binary $bin" >>$x/harness.log; continue; }
        timeout 60 taskset -c 0 $bin $2 $3 $4 $5 $6 30 192 $7 $8 tma - ab 2>&1 | sed "s/^/r$round $1 /" >>$x/harness.log
    done
    echo "harness round $round done at $(at)" >>$x/summary.txt
}
summarize() {
    echo "== harness A/B (old = 3-round epilogue, new = 1-round; ratio = cuBLAS ms / ours ms; same process, in turns)" >>$x/summary.txt
    awk '/ AB / { name = $2; sub(/^r/, "", $1); rd = $1
             match($0, /AB +[0-9]+ x +[0-9]+ x +[0-9]+ op [NT][NT]/); shp = substr($0, RSTART + 3, RLENGTH - 3); gsub(/ /, "", shp); sub(/op/, " ", shp)
             k = name " " shp; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
             match($0, /old [0-9.]+ ms ratio [0-9.]+/); split(substr($0, RSTART, RLENGTH), o, " ")
             match($0, /new [0-9.]+ ms ratio [0-9.]+/); split(substr($0, RSTART, RLENGTH), w, " ")
             match($0, /bits [A-Za-z]+/); b = substr($0, RSTART + 5, RLENGTH - 5)
             match($0, /repeat [A-Za-z]+/); rp = substr($0, RSTART + 7, RLENGTH - 7)
             line[k] = line[k] sprintf("  r%s %s/%s", rd, o[5], w[5]); q[k] += log(o[2] / w[2]); c[k]++
             if (b != "equal" || rp != "ok") bad[k] = bad[k] " r" rd ":" b "/" rp }
         !/ AB / { other = other "\n  " $0 }
         END { printf "%-30s %s\n", "case", "per round: old/new ratio to cuBLAS; new speed / old (geomean of rounds); bits"
               for (i = 1; i <= n; i++) { k = order[i]
                   printf "%-30s%s   new/old %.3f   bits %s\n", k, line[k], exp(q[k] / c[k]), (k in bad) ? "DIFFER" bad[k] : "equal (all rounds, repeat ok)" }
               if (other != "") print "other harness lines:" other }' $x/harness.log >>$x/summary.txt 2>&1
    if ls $x/bench_*_*.txt >/dev/null 2>&1; then
        echo "== library bench (camel bench gemm --set gpt2, bf16): new / base speed per round (ratio-to-cuBLAS quotient), then mean" >>$x/summary.txt
        (cd $x && awk 'FNR == 1 { split(FILENAME, p, "_"); v = p[2]; sub(/\.txt$/, "", p[3]); rd = p[3] }
             { sub(/ FLAG.*/, "") } $2 == "gpt2" && $10 == "sm90" { k = $3 " " $5 "x" $6 "x" $7 " " $11; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
                 r[k, v, rd] = $(NF - 1) }
             END { for (i = 1; i <= n; i++) { line = sprintf("%-40s", order[i]); s = 0; c = 0; bl = ""
                       for (rd = 1; rd <= 9; rd++) if ((order[i], "base", rd) in r && (order[i], "new", rd) in r) {
                           q = r[order[i], "new", rd] / r[order[i], "base", rd]; line = line sprintf(" %.3f", q); s += log(q); c++
                           if (rd == 1) bl = sprintf("   (r1 base %s new %s)", r[order[i], "base", rd], r[order[i], "new", rd]) }
                       if (c) line = line sprintf("   mean %.3f", exp(s / c)); print line bl } }' bench_*_*.txt) >>$x/summary.txt
    fi
}
if [ "$DRY" = 1 ]; then # the summary on made-up output (no build, no GPU)
    : >$x/harness.log
    for round in 1 2; do
        for c in $CASES; do
            set -- ${c//,/ }
            awk -v rd=$round -v nm=$1 -v M=$2 -v N=$3 -v K=$4 -v oa=$5 -v ob=$6 'BEGIN { srand(rd * 13 + length(nm) + M % 7)
                o = 0.02 + rand() / 100; w = o * (0.95 + rand() / 10); r = o * 0.93; b = (nm == "dW" && rd == 2) ? "DIFFER" : "equal"
                printf "r%d %s AB %5d x %5d x %5d op %s%s bn=192 g=16 c=1 | old %.4f ms ratio %.3f | new %.4f ms ratio %.3f | new/old %.3f | cublas %.4f ms | bits %s (0 differ) repeat ok | rel.diff 1.9e-03 sample-err 1.0e-03 | hash 0123456789abcdef 0123456789abcdef\n", rd, nm, M, N, K, oa, ob, o, r / o, w, r / w, o / w, r, b }' >>$x/harness.log
        done
    done
    for rd in 1 2; do
        for v in base new; do
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + (v == "new"))
                printf "%-5s %-8s %-15s %-10s %6s %6s %6s %5s %-3s %-16s %9s %9s %9s %7s %9s\n", "dtype", "set", "op", "name", "M", "N", "K", "batch", "ops", "path", "ours ms", "ours TF/s", "ref TF/s", "ratio", "rel diff"
                split("8192 768 768|8192 2304 768|768 768 8192", c, "|")
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
(cmake -S $W -B /tmp/bn $cfg -DCMAKE_CUDA_FLAGS=-DCML_SM90_EPI1=1 >/dev/null &&
    timeout 300 nice -n 5 cmake --build /tmp/bn -j16 --target camel test_gpu_gemm camel_static) >$x/build_new.log 2>&1 &
pn=$!
(cmake -S $BASE -B /tmp/bb $cfg >/dev/null && timeout 320 nice -n 10 cmake --build /tmp/bb -j16 --target camel camel_static) \
    >$x/build_base.log 2>&1 &
pb=$!
hpids=""
for ops in NT NN TN; do
    (cd $W && nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -DHARNESS_ONLY_192 -DHARNESS_ONLY_$ops \
        -DHARNESS_192_STAGES=5 -Xptxas=--warn-on-spills -Xptxas -v dev/gemm_sm90/harness.cu -lcublas -lcuda \
        -o $x/h_$ops) >$x/nvcc_h_$ops.log 2>&1 &
    hpids="$hpids $!"
done
for p in $hpids; do wait $p; done
echo "harnesses built at $(at): $(ls $x/h_* 2>/dev/null | tr '\n' ' ')" | tee -a $x/summary.txt
echo "harness ptxas (gemm_sm90_kernel, EPI1 = last template argument): registers / spill / C75xx lines:" >>$x/summary.txt
cat $x/nvcc_h_*.log | grep -E "C75[0-9][0-9]|spill stores [1-9]|spill loads [1-9]" | sort | uniq -c | sed 's/^/  /' >>$x/summary.txt
cat $x/nvcc_h_*.log | grep -A4 "Compiling entry function '_Z16gemm_sm90_kernel" | grep -oE "Used [0-9]+ registers" | sort | uniq -c |
    sed 's/^/  kernels: /' >>$x/summary.txt
: >$x/harness.log
round=1
hrun # round 1: while the libraries build (nice 5 / 10); the harness thread at nice 0 on core 0
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
    echo "new lib ptxas: $(grep -cE 'C75[0-9][0-9]' $x/build_new.log) C75xx lines, $(grep -cE 'spill (stores|loads) [1-9]' $x/build_new.log) spill lines" >>$x/summary.txt
    (dhash_link /tmp/bn new >$x/dhash_link_new.log 2>&1) &
    pdn=$!
    t=$(($(left) - 200)); [ $t -gt 120 ] && t=120; [ $t -lt 30 ] && t=30
    (cd /tmp/bn && timeout $t tests/test_gpu_gemm) >$x/test.log 2>&1
    echo "test_gpu_gemm (new, one-round epilogue) rc=$? at $(at): $(grep -E 'passed|failed|FAIL' $x/test.log | tail -3 | tr '\n' ' ')" | tee -a $x/summary.txt
    t=$(($(left) - 170)); [ $t -gt 120 ] && t=120
    if [ $t -ge 30 ]; then
        (cd /tmp/bn && CML_SM90_DEEP_192=all timeout $t tests/test_gpu_gemm) >$x/test_deep.log 2>&1
    else
        echo "skipped: $t s left for it" >$x/test_deep.log
    fi
    echo "test_gpu_gemm (new, CML_SM90_DEEP_192=all) rc=$? at $(at): $(grep -E 'passed|failed|FAIL' $x/test_deep.log | tail -3 | tr '\n' ' ')" | tee -a $x/summary.txt
    wait $pdn
fi
wait $pb
rb=$?
echo "base library build rc=$rb at $(at)" | tee -a $x/summary.txt
[ $rb -eq 0 ] || tail -20 $x/build_base.log
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    dhash_link /tmp/bb base >$x/dhash_link_base.log 2>&1
    for mode in default all; do
        for v in base new; do
            if [ -x /tmp/dhash_$v ]; then
                if [ $mode = all ]; then CML_SM90_DEEP_192=all timeout 40 /tmp/dhash_$v >$x/dhash_${v}_$mode.txt 2>&1
                else timeout 40 /tmp/dhash_$v >$x/dhash_${v}_$mode.txt 2>&1; fi
                echo "dhash $v ($mode) rc=$? at $(at)" >>$x/summary.txt
            else
                echo "dhash $v: not built ($(tail -2 $x/dhash_link_$v.log | tr '\n' ' '))" >>$x/summary.txt
            fi
        done
        nh=$(grep -c '^dhash' $x/dhash_new_$mode.txt 2>/dev/null)
        if [ -s $x/dhash_base_$mode.txt ] && cmp -s $x/dhash_base_$mode.txt $x/dhash_new_$mode.txt && [ "${nh:-0}" -ge 15 ] &&
            [ "$(grep -c 'repeat ok' $x/dhash_new_$mode.txt)" = "$nh" ]; then
            echo "D bitwise ($mode ring choice): the $nh dhash lines equal in base and new, repeats equal" | tee -a $x/summary.txt
        else
            echo "D bitwise ($mode ring choice): DIFFERENT or incomplete (see dhash_*_$mode.txt):" | tee -a $x/summary.txt
            diff $x/dhash_base_$mode.txt $x/dhash_new_$mode.txt | head -10 >>$x/summary.txt
        fi
    done
fi
round=2
while [ $round -le $ROUNDS ] && [ "$(left)" -gt 100 ]; do
    hrun
    round=$((round + 1))
done
bench() { # name binary
    local f=$x/bench_$1_$bround.txt
    timeout 45 $2 bench gemm --dtype bf16 --set gpt2 --reps 30 --commit $1 >$f 2>&1
    echo "bench $1 round $bround rc=$? at $(at)" >>$x/summary.txt
}
bround=1
while [ $rn -eq 0 ] && [ $rb -eq 0 ] && [ "$(left)" -gt 100 ] && [ $bround -le 3 ]; do
    bench base /tmp/bb/apps/camel/camel
    bench new /tmp/bn/apps/camel/camel
    bround=$((bround + 1))
done
summarize
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
