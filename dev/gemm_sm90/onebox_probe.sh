#!/bin/bash
# Session 8, part 2 (dev/gemm_sm90/README.md): one TMA box per M/N-major operand tile, A/B in one
# device call. Builds this tree (/tmp/w, "new") and the base tree (/tmp/base) in parallel, runs
# test_gpu_gemm on the new build while the base one finishes, then `camel bench gemm --set gpt2`
# in turns: base, new, new with CML_SM90_ONE_BOX=0 ("off": the same binary, 3-D maps), while time
# is left; then compute-sanitizer memcheck on test_gpu_gemm if time is still left.
# /tmp/w: a tree with session8_one_box.patch applied (git apply), /tmp/base: the same tree without:
#   tar xzf build-ab/gemm2.tgz -C /tmp/w; tar xzf build-ab/gemm2-base.tgz -C /tmp/base;
#   cd /tmp/w && LIMIT=250 bash dev/gemm_sm90/onebox_probe.sh; logs in /tmp/x
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-250}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
x=/tmp/x
mkdir -p $x
cfg="-G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S /tmp/w -B /tmp/bn $cfg >/dev/null && timeout 170 cmake --build /tmp/bn -j16 --target camel test_gpu_gemm) \
    >$x/build_new.log 2>&1 &
pn=$!
(cmake -S /tmp/base -B /tmp/bb $cfg >/dev/null && timeout 170 nice -n 10 cmake --build /tmp/bb -j16 --target camel) \
    >$x/build_base.log 2>&1 &
pb=$!
wait $pn; rn=$?
echo "new build rc=$rn at $(($(date +%s) - T0)) s" | tee -a $x/summary.txt
if [ $rn -eq 0 ]; then
    (cd /tmp/bn && timeout 90 tests/test_gpu_gemm) >$x/test.log 2>&1
    echo "test_gpu_gemm rc=$? at $(($(date +%s) - T0)) s: $(grep -E 'passed|failed|FAIL' $x/test.log | tail -3 | tr '\n' ' ')" | tee -a $x/summary.txt
fi
wait $pb; rb=$?
echo "base build rc=$rb at $(($(date +%s) - T0)) s" | tee -a $x/summary.txt
tail -5 $x/build_new.log; [ $rb -eq 0 ] || tail -5 $x/build_base.log
bench() { # name binary [env]
    local f=$x/bench_$1_$round.txt
    timeout 40 env $3 $2 bench gemm --dtype bf16 --set gpt2 --reps 30 --commit $1 >$f 2>&1
    echo "bench $1 round $round rc=$? at $(($(date +%s) - T0)) s" >>$x/summary.txt
}
round=1
while [ $rn -eq 0 ] && [ "$(left)" -gt 75 ] && [ $round -le 3 ]; do
    [ $rb -eq 0 ] && bench base /tmp/bb/apps/camel/camel ""
    bench new /tmp/bn/apps/camel/camel ""
    bench off /tmp/bn/apps/camel/camel CML_SM90_ONE_BOX=0
    round=$((round + 1))
done
s=$(($(left) - 5))
if [ $rn -eq 0 ] && [ $s -gt 30 ]; then
    (cd /tmp/bn && CML_TEST_SANITIZER=1 timeout $s compute-sanitizer --tool memcheck tests/test_gpu_gemm) >$x/memcheck.log 2>&1
    echo "memcheck rc=$? (timeout $s s): $(grep -E 'ERROR SUMMARY|passed|failed' $x/memcheck.log | tail -3 | tr '\n' ' ')" >>$x/summary.txt
fi
# ratio per GPT-2 case, one column per run (file order: base, new, off per round)
files=$(ls $x/bench_*.txt 2>/dev/null | sort -t_ -k3,3n -k2,2)
echo "columns: $(for f in $files; do basename $f .txt | sed 's/bench_//'; done | tr '\n' ' ')" >>$x/summary.txt
awk 'FNR == 1 { nf++ } { sub(/ FLAG.*/, "") } $2 == "gpt2" { k = $3 " " $5 "x" $6 "x" $7; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
     r[k, nf] = $(NF - 1) }
     END { for (i = 1; i <= n; i++) { line = sprintf("%-24s", order[i]); for (j = 1; j <= nf; j++) line = line " " r[order[i], j]; print line } }' \
    $files >>$x/summary.txt
cat $x/summary.txt
