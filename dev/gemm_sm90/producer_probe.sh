#!/bin/bash
# Session 8, part 3 (dev/gemm_sm90/README.md): the lean TN producer (E2,
# session9_lean_producer.patch) against base, and the producer headroom sweep (E1), in ONE
# device call. Run from the repository root of the lead's tree:
#   LIMIT=275 bash dev/gemm_sm90/producer_probe.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# Trees: /tmp/base and /tmp/w are copies of this tree; the patch is applied to /tmp/w (or, if
# this tree already has it, reverted in /tmp/base). Then, in parallel: the library + camel +
# test_gpu_gemm of /tmp/w and camel of /tmp/base (cores 4-15), and the TN-only harness of /tmp/w
# once per SPINS value with -DCML_SM90_DEV_PRODUCER_SPIN=N (cores 0-3). On the GPU, in turn:
# test_gpu_gemm (new); the E1 sweep (harness, 2 rounds of each shape x spin, while base still
# builds); `camel bench gemm --dtype bf16 --set gpt2 --reps 30` base/new interleaved x3 while
# time is left; compute-sanitizer memcheck on test_gpu_gemm (new) with what is left. Logs in /tmp/x.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-275}
SPINS=${SPINS:-0 100 200 400}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
x=/tmp/x
mkdir -p $x
patch=dev/gemm_sm90/session9_lean_producer.patch
rm -rf /tmp/w /tmp/base && mkdir -p /tmp/w /tmp/base
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C /tmp/w
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C /tmp/base
if (cd /tmp/w && git apply --check $patch 2>/dev/null); then
    (cd /tmp/w && git apply $patch) && echo "patch applied to /tmp/w" | tee -a $x/summary.txt
elif (cd /tmp/base && git apply -R --check $patch 2>/dev/null); then
    (cd /tmp/base && git apply -R $patch) && echo "tree already patched: reverted in /tmp/base" | tee -a $x/summary.txt
else
    echo "patch neither applies nor reverts: stop" | tee -a $x/summary.txt; exit 1
fi
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S /tmp/w -B /tmp/bn $cfg >/dev/null && timeout 170 taskset -c 4-15 cmake --build /tmp/bn -j12 --target camel test_gpu_gemm) \
    >$x/build_new.log 2>&1 &
pn=$!
(cmake -S /tmp/base -B /tmp/bb $cfg >/dev/null && timeout 190 taskset -c 4-15 nice -n 10 cmake --build /tmp/bb -j12 --target camel) \
    >$x/build_base.log 2>&1 &
pb=$!
for n in $SPINS; do # E1: the producer spins n clocks after each empty-barrier wait
    (cd /tmp/w && taskset -c 0-3 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc \
        -DHARNESS_ONLY_TN -DCML_SM90_DEV_PRODUCER_SPIN=$n dev/gemm_sm90/harness.cu -lcublas -lcuda -o /tmp/h$n) \
        >$x/harness_build_$n.log 2>&1 &
done
wait $pn; rn=$?
echo "new build rc=$rn at $(($(date +%s) - T0)) s" | tee -a $x/summary.txt
if [ $rn -eq 0 ]; then
    (cd /tmp/bn && timeout 90 tests/test_gpu_gemm) >$x/test.log 2>&1
    echo "test_gpu_gemm rc=$? at $(($(date +%s) - T0)) s: $(grep -E 'passed|failed|FAIL' $x/test.log | tail -3 | tr '\n' ' ')" | tee -a $x/summary.txt
fi
# E1 while the base library may still build (the harness times ours against cuBLAS in one process)
# (round 1 while > 110 s are left; round 2 only while the base build still runs: the A/B comes first)
for round in 1 2; do
    for shape in "2304 768 8192 128" "3072 768 8192 192"; do
        set -- $shape
        for n in $SPINS; do
            [ -x /tmp/h$n ] || continue
            [ "$(left)" -gt 110 ] || continue
            [ $round -eq 1 ] || kill -0 $pb 2>/dev/null || continue
            echo "spin=$n round=$round $(taskset -c 0 timeout 20 /tmp/h$n $1 $2 $3 T N 30 $4 16 1 tma 2>&1 | tail -1)" >>$x/e1.txt
        done
    done
done
wait $pb; rb=$?
echo "base build rc=$rb at $(($(date +%s) - T0)) s" | tee -a $x/summary.txt
tail -5 $x/build_new.log; [ $rb -eq 0 ] || tail -5 $x/build_base.log
bench() { # name binary
    local f=$x/bench_$1_$round.txt
    timeout 40 $2 bench gemm --dtype bf16 --set gpt2 --reps 30 --commit $1 >$f 2>&1
    echo "bench $1 round $round rc=$? at $(($(date +%s) - T0)) s" >>$x/summary.txt
}
round=1
while [ $rn -eq 0 ] && [ $rb -eq 0 ] && [ "$(left)" -gt 60 ] && [ $round -le 3 ]; do
    bench base /tmp/bb/apps/camel/camel
    bench new /tmp/bn/apps/camel/camel
    round=$((round + 1))
done
s=$(($(left) - 5))
if [ $rn -eq 0 ] && [ $s -gt 25 ]; then
    (cd /tmp/bn && CML_TEST_SANITIZER=1 timeout $s compute-sanitizer --tool memcheck tests/test_gpu_gemm) >$x/memcheck.log 2>&1
    echo "memcheck rc=$? (timeout $s s): $(grep -E 'ERROR SUMMARY|passed|failed' $x/memcheck.log | tail -3 | tr '\n' ' ')" >>$x/summary.txt
fi
echo "E1 (harness, ours vs cuBLAS ratio per spin; spin 0 = the lean producer as built):" >>$x/summary.txt
sed -E 's/ \| cublas.*\| ratio ([0-9.]+).*/ ratio \1/' $x/e1.txt >>$x/summary.txt 2>/dev/null
# ratio per GPT-2 case, one column per run (file order: base, new per round)
files=$(ls $x/bench_*.txt 2>/dev/null | sort -t_ -k3,3n -k2,2)
echo "columns: $(for f in $files; do basename $f .txt | sed 's/bench_//'; done | tr '\n' ' ')" >>$x/summary.txt
awk 'FNR == 1 { nf++ } { sub(/ FLAG.*/, "") } $2 == "gpt2" { k = $3 " " $5 "x" $6 "x" $7; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
     r[k, nf] = $(NF - 1) }
     END { for (i = 1; i <= n; i++) { line = sprintf("%-24s", order[i]); for (j = 1; j <= nf; j++) line = line " " r[order[i], j]; print line } }' \
    $files >>$x/summary.txt
cat $x/summary.txt
