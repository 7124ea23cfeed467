#!/usr/bin/env bash
# Session 15, ONE device call: the cross-entropy backward from the forward's logsumexp (ce_bwd_lse_kernel; patch
# dev/membound/s15_ce_lse.patch = the change to src tests apps bench include) against the tree without it, and the
# record rows of the ops it touches.
#   bash dev/membound/run_s15_ce.sh; tar czf $OUT/logs.tgz -C /tmp/x .          (run: timeout_s 600)
# 1. ab_trees: new = this tree, base = the patch reverted; both built at once (Release, 90a, -Werror);
# 2. at once, boxed: test_gpu_softmax, test_kernels_softmax, test_gpu_pdl_chain, test_gpu_layernorm,
#    test_gpu_rmsnorm (new), memcheck of test_gpu_softmax's sanitizer subset;
# 3. camel bench membound --ops cross_entropy,cross_entropy_bwd base / new in turns (3 rounds), then new's
#    layernorm_bwd,rmsnorm_bwd once (the nbx default as narrowed), PyTorch's bench/torch_membound.py for the same
#    ops, combined (membound_ce.json, membound_norm.json);
# 4. summary last (dev/membound/s15_ab.py): base / new time per point (geomean of rounds), % of the copy before / after.
# (Its first run printed the summary from an inline script that read a field the raw bench JSON lacks; the logs
# were summarized afterwards with s15_ab.py: s15_ce_results/summary_call1.txt.)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x W=/tmp/w15c BASE=/tmp/b15c
root=$(pwd)
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
. dev/ab_lib.sh
ab_trees $W $BASE $root/dev/membound/s15_ce_lse.patch >$X/trees.txt 2>&1 || { cat $X/trees.txt; exit 1; }
TESTS="test_gpu_softmax test_kernels_softmax test_gpu_pdl_chain test_gpu_layernorm test_gpu_rmsnorm"
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a"
(cmake -S $W -B $W/b $CM >$X/configure_new.log 2>&1 &&
    timeout 300 cmake --build $W/b -j16 --target camel $TESTS >$X/build_new.log 2>&1; echo "rc $?" >>$X/build_new.log) &
(cmake -S $BASE -B $BASE/b $CM >$X/configure_base.log 2>&1 &&
    timeout 300 nice -n 10 cmake --build $BASE/b -j16 --target camel >$X/build_base.log 2>&1
    echo "rc $?" >>$X/build_base.log) &
wait
for b in new base; do
    [ "$(tail -1 $X/build_$b.log)" = "rc 0" ] || { stamp "$b build failed"; grep -E 'error' $X/build_$b.log | head; exit 1; }
done
stamp "built; warnings (new): $(grep -c 'warning' $X/build_new.log)"
N=$W/b
for t in $TESTS; do
    (cd $N/tests && timeout 200 ./$t >$X/$t.log 2>&1; echo "rc $?" >>$X/$t.log) &
done
(cd $N/tests && CML_LN_FWD_ONEPASS_G=1024 timeout 200 ./test_gpu_layernorm >$X/test_lnop_layernorm.log 2>&1
    echo "rc $?" >>$X/test_lnop_layernorm.log) &
(cd $N/tests && CML_TEST_SANITIZER=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 \
    --report-api-errors no ./test_gpu_softmax >$X/san_memcheck_softmax.log 2>&1
    echo "rc $?" >>$X/san_memcheck_softmax.log) &
wait
stamp "tests: $(for f in $X/test_*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
declare -A BIN=([base]=$BASE/b/apps/camel/camel [new]=$N/apps/camel/camel)
ORDERS=("base new" "new base" "base new")
for r in 1 2 3; do
    for v in ${ORDERS[$((r - 1))]}; do
        timeout 100 ${BIN[$v]} bench membound --ops cross_entropy,cross_entropy_bwd --json $X/ce_${v}_$r.json \
            --commit $v >$X/ce_${v}_$r.txt 2>&1
        stamp "bench ce $v round $r (rc $?)"
    done
done
for r in 1 2 3; do # LayerNorm forward: rows of 1024 threads on the one-pass chunk kernel (CML_LN_FWD_ONEPASS_G)
    for v in off on; do
        e=0; [ $v = on ] && e=1024
        CML_LN_FWD_ONEPASS_G=$e timeout 60 $N/apps/camel/camel bench membound --ops layernorm --json $X/ln_${v}_$r.json \
            --commit $v >$X/ln_${v}_$r.txt 2>&1
        stamp "bench ln $v round $r (rc $?)"
    done
done
timeout 100 $N/apps/camel/camel bench membound --ops layernorm_bwd,rmsnorm_bwd --json $X/norm_new.json --commit new \
    >$X/norm_new.txt 2>&1
stamp "bench norm new (rc $?)"
timeout 150 python3 bench/torch_membound.py --ops cross_entropy,cross_entropy_bwd,layernorm_bwd,rmsnorm_bwd \
    --json $X/torch.json >$X/torch.log 2>&1
stamp "torch (rc $?)"
python3 bench/torch_membound.py --combine $X/ce_new_3.json $X/torch.json --out $X/membound_ce.json >$X/ce_table.md 2>&1
python3 bench/torch_membound.py --combine $X/norm_new.json $X/torch.json --out $X/membound_norm.json \
    >$X/norm_table.md 2>&1
python3 dev/membound/s15_ab.py $X ce_base ce_new "cross-entropy: base / new" >$X/summary.txt 2>&1
python3 dev/membound/s15_ab.py $X ln_off ln_on "layernorm fwd: register rows / one-pass for 1024-thread rows" \
    >>$X/summary.txt 2>&1
cat $X/trees.txt $X/stages.txt
grep -h "tests passed\|FAIL\|ERROR SUMMARY" $X/test_*.log $X/san_*.log | head -20
tail -30 $X/ce_table.md
tail -25 $X/norm_table.md
cat $X/summary.txt
