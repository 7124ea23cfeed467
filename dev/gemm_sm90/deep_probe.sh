#!/bin/bash
# Session 9 (helper h9g, dev/gemm_sm90/README.md "Session 9"): the 192-wide tile's 5-stage ring and
# the consumers' wrapped ring position against base, in ONE device call, with binaries built on the
# (GPU-less) dev machine and carried:
#   BIN=build-ab/h9g-bin.tar.xz LIMIT=200 bash dev/gemm_sm90/deep_probe.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# BIN holds base/{camel,test_gpu_gemm} (main) and NEW/{camel,test_gpu_gemm} (this tree; NEW=new in the
# first call, v2 in the second), built with `cmake -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON
# -DCMAKE_CUDA_ARCHITECTURES=90a` and packed with `tar cf - base/camel NEW/camel base/test_gpu_gemm
# NEW/test_gpu_gemm | xz -T1 -9` (the two camels share most bytes: ~17 MB). On the GPU, in turn:
# test_gpu_gemm (NEW); `camel bench gemm --dtype bf16 --set $SETS --reps 30` for each of VARIANTS
# (name:binary folder:environment), interleaved, ROUNDS rounds while time is left; compute-sanitizer
# memcheck on test_gpu_gemm (NEW); then, with what is left, `camel tune gemm --dtype bf16 --set gpt2` on
# NEW (information only; TUNE=0 skips it). Logs in /tmp/x; a table of ratios last.
# Call 1: NEW=new VARIANTS="base:base:- new:new:- all:new:CML_SM90_DEEP_192=all" SETS=gpt2 ROUNDS=3 LIMIT=270.
# Call 2: BIN=.../h9g-bin2.tar.xz NEW=v2 VARIANTS="base:base:- v2:v2:- w4:v2:CML_SM90_DEEP_192=0
#   all:v2:CML_SM90_DEEP_192=all" SETS=gpt2,square ROUNDS=5 LIMIT=200 (each call ran 70-95 s).
# To confirm the library's build against base: pack base/ and v3/ the same way, NEW=v3
#   VARIANTS="base:base:- v3:v3:-" SETS=gpt2,square ROUNDS=5 TUNE=1.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-280}
BIN=${BIN:-build-ab/h9g-bin.tar.xz}
NEW=${NEW:-new}
VARIANTS=${VARIANTS:-"base:base:- new:new:- all:new:CML_SM90_DEEP_192=all"}
SETS=${SETS:-gpt2}
ROUNDS=${ROUNDS:-3}
TUNE=${TUNE:-1}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
x=/tmp/x
mkdir -p $x /tmp/bin
python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" "$BIN" |
    tar xf - -C /tmp/bin || { echo "cannot unpack $BIN" | tee -a $x/summary.txt; exit 1; }
for f in /tmp/bin/*/*; do
    if ldd "$f" | grep -q "not found"; then
        echo "$f: missing libraries: $(ldd "$f" | grep 'not found' | tr '\n' ' ')" | tee -a $x/summary.txt
        exit 1
    fi
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
echo "unpacked at $(($(date +%s) - T0)) s; $(tail -1 $x/gpu.txt)" | tee -a $x/summary.txt
(cd /tmp/bin/$NEW && timeout 120 ./test_gpu_gemm) >$x/test.log 2>&1
echo "test_gpu_gemm ($NEW) rc=$? at $(($(date +%s) - T0)) s: $(grep -E 'passed|failed|FAIL' $x/test.log | tail -3 | tr '\n' ' ')" |
    tee -a $x/summary.txt
bench() { # name binary env ("-": none)
    local f=$x/bench_$1_$round.txt e=$3
    [ "$e" = "-" ] && e=CML_SM90_NOTHING=1
    env $e timeout 40 $2 bench gemm --dtype bf16 --set $SETS --sizes 2048,4096,8192 --reps 30 --commit $1 >$f 2>&1
    echo "bench $1 round $round rc=$? at $(($(date +%s) - T0)) s" >>$x/summary.txt
}
round=1
while [ "$(left)" -gt 90 ] && [ $round -le $ROUNDS ]; do
    for v in $VARIANTS; do
        IFS=: read -r name dir e <<<"$v"
        bench $name /tmp/bin/$dir/camel "$e"
    done
    round=$((round + 1))
done
s=$(($(left) - 40))
[ $s -gt 100 ] && s=100
if [ $s -gt 25 ]; then
    (cd /tmp/bin/$NEW && CML_TEST_SANITIZER=1 timeout $s compute-sanitizer --tool memcheck ./test_gpu_gemm) >$x/memcheck.log 2>&1
    echo "memcheck rc=$? (timeout $s s): $(grep -E 'ERROR SUMMARY|passed|failed' $x/memcheck.log | tail -3 | tr '\n' ' ')" >>$x/summary.txt
fi
s=$(($(left) - 5))
if [ $s -gt 20 ] && [ "$TUNE" = 1 ]; then
    timeout $s /tmp/bin/$NEW/camel tune gemm --dtype bf16 --set gpt2 --reps 20 >$x/tune.txt 2>&1
    echo "tune rc=$? (timeout $s s)" >>$x/summary.txt
fi
# ratio per GPT-2 case, one column per run (file order: round, then base / new / all)
files=$(ls $x/bench_*.txt 2>/dev/null | sort -t_ -k3,3n -k2,2)
echo "columns: $(for f in $files; do basename $f .txt | sed 's/bench_//'; done | tr '\n' ' ')" >>$x/summary.txt
awk 'FNR == 1 { nf++ } { sub(/ FLAG.*/, "") } ($2 == "gpt2" || $2 == "square") && $10 == "sm90" { k = $3 " " $5 "x" $6 "x" $7; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
     r[k, nf] = $(NF - 1); lg[nf] += log($(NF - 1)); cnt[nf]++ }
     END { for (i = 1; i <= n; i++) { line = sprintf("%-24s", order[i]); for (j = 1; j <= nf; j++) line = line " " r[order[i], j]; print line }
           line = sprintf("%-24s", "geomean"); for (j = 1; j <= nf; j++) line = line " " (cnt[j] ? sprintf("%.3f", exp(lg[j] / cnt[j])) : "-"); print line }' \
    $files >>$x/summary.txt
# the products must not change with the stage count: rel diff to cuBLAS per case, round 1
echo "rel diff to cuBLAS, round 1: $(awk '{ sub(/ FLAG.*/, "") } ($2 == "gpt2" || $2 == "square") && $10 == "sm90" { d[FILENAME] = d[FILENAME] " " $NF }
    END { for (f in d) print f ":" d[f] }' $x/bench_*_1.txt | sort | sed 's#.*/bench_##' | tr '\n' ';')" >>$x/summary.txt
cat $x/summary.txt
