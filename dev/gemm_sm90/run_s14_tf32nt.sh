#!/bin/bash
# Session 13, helper h13e (dev/gemm_sm90/README.md, "Session 13 (helper h13e)"): tf32's 128 x 192 tile for the
# K = 768 forwards (op NT; s14_tf32nt.patch: the 192-wide tf32 kernel, 4 stages, f32 D through 4 staging buffers a
# consumer; tuned rows for 8192 x 2304 / 3072 / 50304 x 768 NT; CML_SM90_TF32_192=0 switches it off) against
# today's (128 x 128 c2 / 128 x 256 c2), in ONE device call from the repository root of the lead's tree
# (timeout_s 600):
#   bash dev/gemm_sm90/run_s14_tf32nt.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# Trees: /tmp/base and /tmp/w are copies of this tree; the patch goes onto /tmp/w (or, if this tree already has
# it, comes off /tmp/base). Built at once: the patched library (camel, test_gpu_gemm, camel_static) and the base
# library (camel, camel_static; niced), both with ptxas -v. Then, on the GPU:
#  1. ptxas: C75xx and spill lines of both builds; registers of the tf32 192-wide kernels; SASS of gemm_sm90.cu.o
#     base vs new (dev/attention_sm90/sass_same.py): only the 2 new kernels (<192, 4, TF32, 0, 0, c1 / c2>) may
#     differ or be new;
#  2. test_gpu_gemm of the new library (test_tf32_192: awkward NT shapes, padded D, epilogues, K splits, clusters,
#     > 132 tiles, the launch counter, on and off; prints whether D is bitwise equal with the tile on and off);
#  3. dhash_tf32 in both libraries: the three K = 768 forward lines now run the 192-wide tile; the lines are
#     expected equal (same k order per element) and must repeat;
#  4. `camel bench gemm --dtype tf32,bf16 --set square,gpt2 --sizes 2048,4096,8192 --ops NN,NT` base / new in turns
#     (ROUNDS, default 3, up to 4 while time is left), SM clock / power logged per round (nvidia-smi, 100 ms);
#     then tf32 gpt2 NT runs of the new library with CML_SM90_TF32_192=0 ("off": the switch), =c2 and =c1 (the
#     192-wide rows with clusters of 2 / 1), each compared with new's round 1, and `camel tune gemm --dtype tf32
#     --set gpt2 --ops NT` on the new library (the 192-wide tile's best cluster / group_m per shape: rows for the
#     table) while time is left. Logs in /tmp/x; the bench_ab.py summary is printed LAST.
# Locally (no GPU): DRY=1 W=/tmp/s14_w BASE=/tmp/s14_base X=/tmp/s14_x bash dev/gemm_sm90/run_s14_tf32nt.sh
# checks that the patch applies and runs the summary code on made-up bench output.
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
root=$(pwd)
patch=dev/gemm_sm90/s14_tf32nt.patch
mkdir -p $x
: >$x/summary.txt
. dev/ab_lib.sh
ab_trees $W $BASE $patch | tee -a $x/summary.txt
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
BENCH_ARGS="bench gemm --dtype tf32,bf16 --set square,gpt2 --sizes 2048,4096,8192 --ops NN,NT --reps 20"
OFF_ARGS="bench gemm --dtype tf32 --set gpt2 --ops NT --reps 20"
clock_summary() { # mean SM clock / power / max temperature per bench window (nvidia-smi log, epoch-stamped)
    [ -s $x/clocks.txt ] && [ -s $x/windows.txt ] || return 0
    python3 - $x/clocks.txt $x/windows.txt <<'EOF'
import sys, time
samples = []  # nvidia-smi lines: "2026/11/23 07:42:55.123, 1980 MHz, 412.35 W, 55" (local time, as date +%s)
for l in open(sys.argv[1]):
    t = [v.strip() for v in l.split(",")]
    try:
        day, frac = t[0].split(".") if "." in t[0] else (t[0], "0")
        epoch = time.mktime(time.strptime(day, "%Y/%m/%d %H:%M:%S")) + float("0." + frac)
        samples.append((epoch, float(t[1].split()[0]), float(t[2].split()[0]), float(t[3])))
    except (ValueError, IndexError):
        pass
print("-- SM clock (MHz) / power (W) / max temperature per bench run (nvidia-smi every 100 ms) --")
for l in open(sys.argv[2]):
    name, t0, t1 = l.split()
    s = [v for v in samples if float(t0) <= v[0] <= float(t1)]
    if s:
        print(f"  {name:10s} {sum(v[1] for v in s) / len(s):6.0f} MHz {sum(v[2] for v in s) / len(s):6.0f} W "
              f"{max(v[3] for v in s):4.0f} C  ({len(s)} samples)")
EOF
}
summarize() {
    clock_summary >>$x/summary.txt 2>&1
    if [ -s $x/tune.txt ]; then
        echo "-- camel tune gemm --dtype tf32 --set gpt2 --ops NT (new library): best plan per case --" >>$x/summary.txt
        grep -E "^CML_SM90_TUNED" $x/tune.inc 2>/dev/null | cut -c1-130 | head -6 >>$x/summary.txt
        python3 -c "import json,sys
for r in json.load(open(sys.argv[1]))['results']:
    s = r['shape']; print('  %dx%dx%d est %s %.4f ms, best %s %.4f ms' % (s['M'], s['N'], s['K'],
        '/'.join(str(r['estimate'][k]) for k in ('rows', 'bn', 'splits', 'cluster', 'group_m')), r['estimate_ms'],
        '/'.join(str(r['best'][k]) for k in ('rows', 'bn', 'splits', 'cluster', 'group_m')), r['best_ms']))" \
            $x/tune.json >>$x/summary.txt 2>&1
    fi
    for v in off c2 c1; do
        ls $x/bench_${v}_*.txt >/dev/null 2>&1 || continue
        echo "-- new library with CML_SM90_TF32_192=$([ $v = off ] && echo 0 || echo $v) ($v) -> new (round 1), tf32 gpt2 NT --" >>$x/summary.txt
        python3 $root/dev/gemm_sm90/bench_ab.py $x $v new | grep -E "^tf32 +gpt2_fwd|geomean.*tf32 +gpt2" | cut -c1-150 >>$x/summary.txt 2>&1
    done
    python3 $root/dev/gemm_sm90/bench_ab.py $x >>$x/summary.txt 2>&1
}
if [ "$DRY" = 1 ]; then # the summary on made-up output (no build, no GPU)
    now=$(date +%s)
    for rd in 1 2 3; do
        for v in base new off c2 c1; do
            [ $v != base ] && [ $v != new ] && [ $rd -gt 1 ] && continue
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + (v == "new"))
                printf "%-5s %-8s %-15s %-10s %6s %6s %6s %5s %-3s %-16s %9s %9s %9s %7s %9s\n", "dtype", "set", "op", "name", "M", "N", "K", "batch", "ops", "path", "ours ms", "ours TF/s", "ref TF/s", "ratio", "rel diff"
                split("gemm square 2048 2048 2048 NN|gemm square 8192 8192 8192 NT|gpt2_fwd attn_qkv 8192 2304 768 NT|gpt2_fwd mlp_fc 8192 3072 768 NT|gpt2_fwd lm_head 8192 50304 768 NT|gpt2_dx attn_qkv 8192 768 2304 NN", c, "|")
                for (d = 0; d < 2; d++) for (i = 1; i <= 6; i++) { split(c[i], s, " "); ms = 0.1 + rand() / 100
                    fwd = s[1] == "gpt2_fwd" && d == 0; if (v == "new" && fwd) ms *= 0.9
                    path = fwd && v == "new" ? "sm90 128x192x1 c1 tuned" : "sm90 128x256x1 c2"
                    printf "%-5s %-8s %-15s %-10.10s %6d %6d %6d %5d %s  %-16s %9.4f %9s %9s %7.3f %9s\n", d ? "bf16" : "tf32", s[1] == "gemm" ? "square" : "gpt2", s[1], s[2], s[3], s[4], s[5], 1, s[6], path, ms, "300.0", "330.0", 0.09 / ms, "7.8e-04" } }' \
                >$x/bench_${v}_$rd.txt
        done
    done
    for i in $(seq 0 40); do echo "$(date -d @$((now + i)) '+%Y/%m/%d %H:%M:%S').500, 1980 MHz, $((400 + i)).00 W, 55"; done >$x/clocks.txt
    printf "base_1 %s %s\nnew_1 %s %s\n" $now $((now + 10)) $((now + 10)) $((now + 20)) >$x/windows.txt
    summarize
    cat $x/summary.txt
    exit 0
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv >$x/gpu.txt 2>&1
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
    # registers of the tf32 192-wide kernels (BN 192, KIND 2) in the new build's ptxas -v output
    grep -A3 "Compiling entry function '_Z16gemm_sm90_kernelILi192ELi4ELi2E" $x/build_new.log |
        grep -oE "Used [0-9]+ registers|[0-9]+ bytes spill stores|[0-9]+ bytes smem" | sort | uniq -c |
        sed "s/^/  tf32 192-wide kernels: /" >>$x/summary.txt
    (dhash_link /tmp/bn new >$x/dhash_link_new.log 2>&1) &
    pdn=$!
    t=$(($(left) - 300)); [ $t -gt 150 ] && t=150; [ $t -lt 40 ] && t=40
    (cd /tmp/bn && timeout $t tests/test_gpu_gemm) >$x/test.log 2>&1
    echo "test_gpu_gemm (new) rc=$? at $(at): $(grep -E 'passed|failed|FAIL' $x/test.log | tail -3 | tr '\n' ' ')" | tee -a $x/summary.txt
    grep -E "192-wide tile vs|FAIL" $x/test.log | head -5 | sed 's/^/  /' >>$x/summary.txt
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
    quick=0; [ "$(left)" -lt 300 ] && quick=1 # the 8192^3 and lm_head lines take ~25 s a build
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
        echo "D bitwise: DIFFERENT or incomplete ($nh lines, $(grep -c 'repeat ok' $x/dhash_new.txt 2>/dev/null) repeat ok; see dhash_*.txt); differing lines (base <, new >):" | tee -a $x/summary.txt
        diff $x/dhash_base.txt $x/dhash_new.txt | grep '^[<>]' | cut -c1-120 | head -16 >>$x/summary.txt
    fi
fi
# SM clock, power, temperature every 100 ms, epoch-stamped (tf32 runs near the power limit: 8192^3 is slower than
# 4096^3 for cuBLAS too), to read each bench run's clocks next to its times
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 -f $x/clocks.txt &
pclk=$!
: >$x/windows.txt
bench() { # name binary args [env]
    local f=$x/bench_$1_$bround.txt t1
    t1=$(date +%s.%N | cut -c1-14)
    env ${4:-CML_NOTHING=1} timeout 90 $2 $3 --commit $1 >$f 2>&1
    echo "bench $1 round $bround rc=$? at $(at)" >>$x/summary.txt
    echo "$1_$bround $t1 $(date +%s.%N | cut -c1-14)" >>$x/windows.txt
}
bround=1
while [ $rn -eq 0 ] && [ $rb -eq 0 ] && [ "$(left)" -gt 130 ] && { [ $bround -le $ROUNDS ] || [ "$(left)" -gt 190 ]; } && [ $bround -le 4 ]; do
    bench base /tmp/bb/apps/camel/camel "$BENCH_ARGS"
    bench new /tmp/bn/apps/camel/camel "$BENCH_ARGS"
    bround=$((bround + 1))
done
bround=1 # the switch (off) and the rows' clusters (c1, c2), tf32 gpt2 NT on the new library, against new's round 1
for v in off c2 c1; do
    val=$v; [ $v = off ] && val=0
    [ $rn -eq 0 ] && [ "$(left)" -gt 30 ] && bench $v /tmp/bn/apps/camel/camel "$OFF_ARGS" CML_SM90_TF32_192=$val
done
if [ $rn -eq 0 ] && [ "$(left)" -gt 45 ]; then # the 192-wide tile's best plans (rows for the table)
    timeout $(($(left) - 15)) /tmp/bn/apps/camel/camel tune gemm --dtype tf32 --set gpt2 --ops NT --out $x/tune.inc \
        --json $x/tune.json >$x/tune.txt 2>&1
    echo "tune (new, tf32 gpt2 NT) rc=$? at $(at)" >>$x/summary.txt
fi
kill $pclk 2>/dev/null
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
summarize
cat $x/summary.txt
