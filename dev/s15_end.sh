#!/usr/bin/env bash
# Session 15's last device call: the conversion with amax launched with PDL except from f32 at >= 64 MiB
# (dev/membound/s15_amax_pdl.patch) in turns with the tree without it, and the whole GPU suite on the final tree.
#   bash dev/s15_end.sh; tar czf $OUT/logs.tgz -C /tmp/x --exclude='build_*.log' .          (run: timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x W=/tmp/w15e BASE=/tmp/b15e
root=$(pwd)
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
. dev/ab_lib.sh
ab_trees $W $BASE $root/dev/membound/s15_amax_pdl.patch >$X/trees.txt 2>&1 || { cat $X/trees.txt; exit 1; }
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B $W/b $CM >$X/configure_new.log 2>&1 &&
    timeout 300 cmake --build $W/b -j16 >$X/build_new.log 2>&1; echo "rc $?" >>$X/build_new.log) &
(cmake -S $BASE -B $BASE/b $CM >$X/configure_base.log 2>&1 &&
    timeout 300 nice -n 10 cmake --build $BASE/b -j16 --target camel >$X/build_base.log 2>&1
    echo "rc $?" >>$X/build_base.log) &
wait
for b in new base; do
    [ "$(tail -1 $X/build_$b.log)" = "rc 0" ] || { stamp "$b build failed"; grep -E 'error' $X/build_$b.log | head; exit 1; }
done
stamp "built; warnings (new): $(grep -c 'warning' $X/build_new.log) (C7519: $(grep -c C7519 $X/build_new.log))"
declare -A BIN=([base]=$BASE/b/apps/camel/camel [new]=$W/b/apps/camel/camel)
ORDERS=("base new" "new base" "base new")
for r in 1 2 3; do
    for v in ${ORDERS[$((r - 1))]}; do
        timeout 60 ${BIN[$v]} bench membound --ops convert_scaled_e4m3_amax,convert_scaled_e4m3 \
            --json $X/cv_${v}_$r.json --commit $v >$X/cv_${v}_$r.txt 2>&1
        stamp "bench convert $v round $r (rc $?)"
    done
done
(cd $W/b && timeout 260 ctest -L gpu -j4 --output-on-failure >$X/ctest_gpu.log 2>&1; echo "rc $?" >>$X/ctest_gpu.log)
stamp "ctest -L gpu: $(grep -E 'tests passed' $X/ctest_gpu.log)"
python3 dev/membound/s15_ab.py $X cv_base cv_new "convert_scaled: base / new (amax with PDL below 64 MiB or from 16-bit)" \
    >$X/summary.txt 2>&1
cat $X/trees.txt $X/stages.txt
grep -E "\*\*\*Failed|Timeout" $X/ctest_gpu.log | head
cat $X/summary.txt
