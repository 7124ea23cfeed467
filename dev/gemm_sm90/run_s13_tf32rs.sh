#!/bin/bash
# Session 13, helper h13b (dev/gemm_sm90/README.md, "Session 13 (helper h13b)"): tf32 with one M/N-major operand
# read into registers (wgmma RS) instead of transposed (NN: D^T = B^T A^T; TT / TN with M > N: A from registers;
# TN repacks the smaller operand only; s13_tf32rs.patch) against today's (NN / TT one, TN both operands transposed
# into the workspace first), in ONE device call from the repository root of the lead's tree (timeout_s 600):
#   bash dev/gemm_sm90/run_s13_tf32rs.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# Trees: /tmp/base and /tmp/w are copies of this tree; the patch goes onto /tmp/w (or, if this tree already has
# it, comes off /tmp/base). Built at once: the patched library (camel, test_gpu_gemm, camel_static) and the base
# library (camel, camel_static; niced), both with ptxas -v. Then, on the GPU:
#  1. ptxas: C75xx and spill lines of both builds; registers of the tf32 kernels (TRANS_A=1, 2: the RS ones); SASS of
#     gemm_sm90.cu.o base vs new (dev/attention_sm90/sass_same.py): only the new RS kernels may differ;
#  2. test_gpu_gemm of the new library (test_tf32_rs: awkward NN / TN / TT shapes, epilogues, forced plans, the launch
#     counter; prints whether D is bitwise equal with RS on and off);
#  3. dhash_tf32 (dev/gemm_sm90/dhash_tf32.cu: NN squares / dX, TN 4096 / dW, now NN epilogue lines) in both libraries: the lines must be
#     equal (D bitwise the same as with B transposed first) and repeat;
#  4. `camel bench gemm --dtype tf32 --set square,gpt2 --sizes 2048,4096,8192 --ops NN,NT` base / new in turns
#     (ROUNDS, default 2, up to 4 while time is left), then one round of the new library with CML_SM90_TF32_RS=0
#     ("off": the switch, same binary) if time is left. Logs in /tmp/x; the bench_ab.py summary is printed LAST.
# Locally (no GPU): DRY=1 W=/tmp/s13rs_w BASE=/tmp/s13rs_base X=/tmp/s13rs_x bash dev/gemm_sm90/run_s13_tf32rs.sh
# checks that the patch applies and runs the summary code on made-up bench output.
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
root=$(pwd)
patch=dev/gemm_sm90/s13_tf32rs.patch
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
    if ls $x/bench_off_*.txt >/dev/null 2>&1; then
        echo "-- the switch: new library with CML_SM90_TF32_RS=0 (off) -> new, same rounds --" >>$x/summary.txt
        python3 $root/dev/gemm_sm90/bench_ab.py $x off new | grep -E "square|gpt2_dx|gpt2_dw|geomean" >>$x/summary.txt 2>&1
    fi
    python3 $root/dev/gemm_sm90/bench_ab.py $x >>$x/summary.txt 2>&1
}
if [ "$DRY" = 1 ]; then # the summary on made-up output (no build, no GPU)
    for rd in 1 2; do
        for v in base new off; do
            [ $v = off ] && [ $rd = 2 ] && continue
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + (v == "new"))
                printf "%-5s %-8s %-15s %-10s %6s %6s %6s %5s %-3s %-16s %9s %9s %9s %7s %9s\n", "dtype", "set", "op", "name", "M", "N", "K", "batch", "ops", "path", "ours ms", "ours TF/s", "ref TF/s", "ratio", "rel diff"
                split("gemm square 2048 2048 2048 NN|gemm square 2048 2048 2048 NT|gemm square 8192 8192 8192 NN|gemm square 8192 8192 8192 NT|gpt2_fwd attn_qkv 8192 2304 768 NT|gpt2_dx attn_qkv 8192 768 2304 NN|gpt2_dw attn_qkv 2304 768 8192 TN", c, "|")
                for (i = 1; i <= 7; i++) { split(c[i], s, " "); ms = 0.05 + rand() / 100; if (v == "new" && s[6] == "NN") ms *= 0.85
                    printf "%-5s %-8s %-15s %-10.10s %6d %6d %6d %5d %s  %-16s %9.4f %9s %9s %7.3f %9s\n", "tf32", s[1] == "gemm" ? "square" : "gpt2", s[1], s[2], s[3], s[4], s[5], 1, s[6], "sm90 128x256x1 c2", ms, "300.0", "330.0", 0.045 / ms, "7.8e-04" } }' \
                >$x/bench_${v}_$rd.txt
        done
    done
    summarize
    cat $x/summary.txt
    exit 0
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_CUDA_FLAGS=-Xptxas=-v"
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
    nvcc -O2 -std=c++17 -arch=sm_90a -I$W/include $W/dev/gemm_sm90/dhash_tf32.cu $1/src/libcamel.a ${blas:+-Xlinker $blas} \
        -lz -lgomp -ldl -lrt -lpthread -o /tmp/dhash_$2
}
ptx_lines() { # build log -> "n C75xx lines, m spill lines"
    echo "$(grep -cE 'C75[0-9][0-9]' $1) C75xx lines, $(grep -cE 'spill (stores|loads) [1-9]' $1) spill lines"
}
if [ $rn -eq 0 ]; then
    echo "new lib ptxas: $(ptx_lines $x/build_new.log)" >>$x/summary.txt
    grep -E "C75[0-9][0-9]|spill stores [1-9]|spill loads [1-9]" $x/build_new.log | sort | uniq -c | head -10 | sed 's/^/  /' >>$x/summary.txt
    # registers of the tf32 kernels (KIND 2; TRANS_A 1 = the RS kernels) in the new build's ptxas -v output
    for ta in 0 1 2; do
        grep -A3 "Compiling entry function '_Z16gemm_sm90_kernelILi[0-9]*ELi[0-9]ELi2ELi${ta}E" $x/build_new.log |
            grep -oE "Used [0-9]+ registers|[0-9]+ bytes spill stores" | sort | uniq -c | sed "s/^/  tf32 kernels TRANS_A=$ta: /" >>$x/summary.txt
    done
    (dhash_link /tmp/bn new >$x/dhash_link_new.log 2>&1) &
    pdn=$!
    t=$(($(left) - 270)); [ $t -gt 150 ] && t=150; [ $t -lt 40 ] && t=40
    (cd /tmp/bn && timeout $t tests/test_gpu_gemm) >$x/test.log 2>&1
    echo "test_gpu_gemm (new) rc=$? at $(at): $(grep -E 'passed|failed|FAIL' $x/test.log | tail -3 | tr '\n' ' ')" | tee -a $x/summary.txt
    grep -E "RS launch vs|FAIL" $x/test.log | head -5 | sed 's/^/  /' >>$x/summary.txt
    wait $pdn
fi
wait $pb
rb=$?
echo "base library build rc=$rb at $(at)" | tee -a $x/summary.txt
[ $rb -eq 0 ] || tail -20 $x/build_base.log
if [ $rn -eq 0 ] && [ $rb -eq 0 ]; then
    echo "base lib ptxas: $(ptx_lines $x/build_base.log)" >>$x/summary.txt
    ob=$(find /tmp/bb -name 'gemm_sm90.cu.o' | head -1)
    on=$(find /tmp/bn -name 'gemm_sm90.cu.o' | head -1)
    if [ -n "$ob" ] && [ -n "$on" ]; then
        CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump) \
            python3 $root/dev/attention_sm90/sass_same.py $ob $on >$x/sass_same.txt 2>&1
        echo "SASS base vs new (gemm_sm90.cu.o): $(grep -c '^identical' $x/sass_same.txt) identical; others:" >>$x/summary.txt
        grep -v '^identical' $x/sass_same.txt | cut -c1-150 | head -12 | sed 's/^/  /' >>$x/summary.txt
    fi
    dhash_link /tmp/bb base >$x/dhash_link_base.log 2>&1
    quick=0; [ "$(left)" -lt 270 ] && quick=1 # the 8192^3 and lm_head lines take ~25 s a build
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
        echo "D bitwise: DIFFERENT or incomplete ($nh lines; see dhash_*.txt); differing lines (base <, new >):" | tee -a $x/summary.txt
        diff $x/dhash_base.txt $x/dhash_new.txt | grep '^[<>]' | cut -c1-120 | head -16 >>$x/summary.txt
    fi
fi
bench() { # name binary [env]
    local f=$x/bench_$1_$bround.txt
    env ${3:-CML_NOTHING=1} timeout 60 $2 $BENCH_ARGS --commit $1 >$f 2>&1
    echo "bench $1 round $bround rc=$? at $(at)" >>$x/summary.txt
}
bround=1
while [ $rn -eq 0 ] && [ $rb -eq 0 ] && [ "$(left)" -gt 110 ] && { [ $bround -le $ROUNDS ] || [ "$(left)" -gt 150 ]; } && [ $bround -le 4 ]; do
    bench base /tmp/bb/apps/camel/camel
    bench new /tmp/bn/apps/camel/camel
    bround=$((bround + 1))
done
if [ $rn -eq 0 ] && [ "$(left)" -gt 50 ]; then
    bround=1
    bench off /tmp/bn/apps/camel/camel CML_SM90_TF32_RS=0
fi
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
summarize
cat $x/summary.txt
