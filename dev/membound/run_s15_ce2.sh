#!/usr/bin/env bash
# Session 15, second device call: the cross-entropy backward from the forward's logsumexp with its words held packed
# (ce_bwd_lse_kernel; 16-bit rows UNROLL 8 by default, CML_CE_BWD_LSE_UNROLL=4 the other form) against the tree
# without the change (patch dev/membound/s15_ce_lse.patch reverted), the whole GPU suite on the new tree, and the
# record rows of the ops this session touched.
#   bash dev/membound/run_s15_ce2.sh; tar czf $OUT/logs.tgz -C /tmp/x --exclude='build_*.log' .   (timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x W=/tmp/w15c BASE=/tmp/b15c
root=$(pwd)
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
. dev/ab_lib.sh
ab_trees $W $BASE $root/dev/membound/s15_ce_lse.patch >$X/trees.txt 2>&1 || { cat $X/trees.txt; exit 1; }
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
N=$W/b
(cd $N && timeout 230 ctest -L gpu -j4 --output-on-failure >$X/ctest_gpu.log 2>&1; echo "rc $?" >>$X/ctest_gpu.log)
stamp "ctest -L gpu: $(grep -E 'tests passed' $X/ctest_gpu.log)"
(cd $N/tests && CML_TEST_SANITIZER=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 \
    --report-api-errors no ./test_gpu_softmax >$X/san_memcheck_softmax.log 2>&1
    echo "rc $?" >>$X/san_memcheck_softmax.log)
stamp "memcheck softmax: $(tail -1 $X/san_memcheck_softmax.log) $(grep 'ERROR SUMMARY' $X/san_memcheck_softmax.log)"
declare -A BIN=([base]=$BASE/b/apps/camel/camel [new]=$N/apps/camel/camel [u4]=$N/apps/camel/camel)
declare -A ENVS=([base]="" [new]="" [u4]="CML_CE_BWD_LSE_UNROLL=4")
ORDERS=("base new u4" "u4 new base" "new base u4")
for r in 1 2 3; do
    for v in ${ORDERS[$((r - 1))]}; do
        env ${ENVS[$v]} timeout 60 ${BIN[$v]} bench membound --ops cross_entropy_bwd --json $X/ce_${v}_$r.json \
            --commit $v >$X/ce_${v}_$r.txt 2>&1
        stamp "bench ce $v round $r (rc $?)"
    done
done
OPS=cross_entropy,cross_entropy_bwd,layernorm,layernorm_bwd
timeout 100 $N/apps/camel/camel bench membound --ops $OPS --json $X/rec_new.json --commit new >$X/rec_new.txt 2>&1
stamp "bench record ops (rc $?)"
timeout 120 python3 bench/torch_membound.py --ops $OPS --json $X/torch.json >$X/torch.log 2>&1
stamp "torch (rc $?)"
python3 bench/torch_membound.py --combine $X/rec_new.json $X/torch.json --out $X/membound_s15.json >$X/rec_table.md 2>&1
python3 dev/membound/s15_ab.py $X ce_base ce_new "cross_entropy_bwd: base / new (16-bit UNROLL 8)" >$X/summary.txt 2>&1
python3 dev/membound/s15_ab.py $X ce_base ce_u4 "cross_entropy_bwd: base / u4 (16-bit UNROLL 4)" >>$X/summary.txt 2>&1
python3 dev/membound/s15_ab.py $X ce_u4 ce_new "cross_entropy_bwd: u4 / new" >>$X/summary.txt 2>&1
cat $X/trees.txt $X/stages.txt
grep -E "Failed|\*\*\*Failed|Timeout" $X/ctest_gpu.log | head
tail -28 $X/rec_table.md
cat $X/summary.txt
