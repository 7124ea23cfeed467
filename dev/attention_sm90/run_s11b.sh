#!/bin/bash
# Session 11, helper h11b (README "Session 11 (helper h11b)"): the causal longest-first backward order (VAR LPT,
# s11b_lpt128.patch) in the library at D = 128, causal, S_kv >= 8192, in ONE device call. Run from the repository
# root of the lead's tree (with or without the patch applied: without, it works on a patched copy, /tmp/w11b):
#   bash dev/attention_sm90/run_s11b.sh; tar czf $OUT/logs.tgz -C /tmp/x .        (run with timeout_s 600)
# Steps (deadline LIMIT = 560 s; each step under min(its limit, time left)):
#  1. at once: bwd_harness.cu -DHD=128 -DSET=6 (lib / lpt / lib (2) / lpt (2), all with the library's PDL convert,
#     lpt with 2 kv heads interleaved and the convert claiming downwards) and the library (cmake -G Ninja, -Werror,
#     sm_90a: camel_shared, test_gpu_attention_bwd90, test_gpu_attention; niced);
#  2. harness `edge` (lib runs bitwise equal to lib; lpt runs bitwise equal to the first lpt run and within 1e-2 of
#     lib's), while the library builds;
#  3. once both are built: `perf` CAUSAL=1 REPS=25 at S = 8192 16384 and then 4096 (perf_shape: B S = 16k tokens,
#     H = 16; lpt is forced at 4k, where the library's rule does not take it), bwd_decide.py lpt vs lib on 8k / 16k
#     (the rule's points) and on 4k (what the rule avoids);
#  4. all at once on the library: test_gpu_attention_bwd90 (the rule: S_kv 8192 / 16384 cases and the S = 8192
#     determinism loop longest first), again with CML_ATT_BWD_LPT=1 (every causal D = 128 case longest first),
#     test_gpu_attention; then, with the time left, compute-sanitizer racecheck and synccheck of
#     test_gpu_attention_bwd90 at D = 128 with CML_ATT_BWD_LPT=1 (CML_TEST_SANITIZER=1: shapes up to 300);
#  5. the summary, LAST (also $X/summary.txt): ptxas C75xx / spill lines of the backward in both builds, edge and
#     perf checks, the decisions, test results.
# Locally (no GPU): DRY=1 X=/tmp/me_x bash dev/attention_sm90/run_s11b.sh checks that the patch applies (or is
# there) and prints the summary of the logs already in $X (made-up ones for a check).
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-560}
DRY=${DRY:-0}
X=${X:-/tmp/x}
W=${W:-/tmp/w11b}
H=$W/build-att/h11b_6
B=$W/build-s11b
patch=dev/attention_sm90/s11b_lpt128.patch
mkdir -p $X
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0))s"; }
step() { # step NAME MAX CMD...: CMD under min(MAX, time left), output in $X/NAME.txt, its rc and time last
    local name=$1 max=$2 t
    shift 2
    t=$(left)
    [ $t -gt $max ] && t=$max
    if [ $t -lt 15 ]; then
        echo "$name: skipped (deadline)" >$X/$name.txt
        return
    fi
    timeout $t "$@" >$X/$name.txt 2>&1
    echo "$name rc=$? (${t}s limit, done at $(at))" >>$X/$name.txt
}

# the tree to work on: this one if it has the patch, else a patched copy
if grep -q CML_ATT90B_V_LPT src/kernels/cuda/attention/attention_bwd_sm90.cuh; then
    W=$(pwd) H=$(pwd)/build-att/h11b_6 B=$(pwd)/build-s11b
    echo "tree has the longest-first order: working in $W" >$X/tree.txt
else
    rm -rf $W && mkdir -p $W
    tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
    if (cd $W && git apply $patch); then
        echo "patch applied to the copy $W" >$X/tree.txt
    else
        echo "s11b_lpt128.patch does not apply: stop" | tee $X/tree.txt
        exit 1
    fi
fi

if [ "$DRY" != 1 ]; then
    cd $W
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,temperature.gpu --format=csv,noheader >$X/gpu.txt 2>&1
    mkdir -p build-att
    (timeout 200 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=128 -DSET=6 \
        dev/attention_sm90/bwd_harness.cu -lcuda -o $H >$X/nvcc6.txt 2>&1
     echo "harness built rc=$? at $(at)" >>$X/nvcc6.txt) &
    hpid=$!
    (cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >$X/build.log 2>&1 &&
        timeout 300 nice -n 5 cmake --build $B -j14 --target camel_shared test_gpu_attention_bwd90 test_gpu_attention \
            >>$X/build.log 2>&1
     echo "library built rc=$? at $(at)" >>$X/build.log) &
    bpid=$!
    wait $hpid
    [ -x $H ] && step edge 90 $H edge
    wait $bpid
    if [ -x $H ]; then
        CAUSAL=1 REPS=25 step perf_c 150 $H perf 8192 16384
        CAUSAL=1 REPS=25 step perf_4k 60 $H perf 4096
    fi
    T=$B/tests
    if [ -x $T/test_gpu_attention_bwd90 ]; then
        step t_bwd90 200 $T/test_gpu_attention_bwd90 &
        CML_ATT_BWD_LPT=1 step t_bwd90_lpt1 200 $T/test_gpu_attention_bwd90 &
        step t_attn 200 $T/test_gpu_attention &
        wait
        export CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=128 CML_ATT_BWD_LPT=1
        step san_race 100 compute-sanitizer --tool racecheck --error-exitcode 9 $T/test_gpu_attention_bwd90 &
        step san_sync 100 compute-sanitizer --tool synccheck --error-exitcode 9 $T/test_gpu_attention_bwd90 &
        wait
        unset CML_TEST_SANITIZER CML_TEST_ONLY_D CML_ATT_BWD_LPT
    fi
    cd - >/dev/null
fi

# ---- summary (last: the reply shows the tail) ----
D=$(dirname "$0")
{
    cat $X/gpu.txt $X/tree.txt 2>/dev/null
    echo "== builds"
    tail -1 $X/nvcc6.txt 2>/dev/null
    tail -1 $X/build.log 2>/dev/null
    for f in nvcc6.txt build.log; do
        echo "-- $f: ptxas C75xx (att90b kernels): $(grep -E 'C75[0-9][0-9]' $X/$f 2>/dev/null | grep att90b |
            grep -oE '\(C75[0-9]+\)' | sort | uniq -c | tr -s ' \n' ' ')" \
            "(expected: C7519 only, one per D = 128 / 64 main kernel and dtype, the LPT kernels' too);" \
            "spilling functions: $(grep -E 'bytes spill' $X/$f 2>/dev/null | grep -vc ' 0 bytes spill stores, 0 bytes spill loads')"
        grep -E 'error' $X/$f 2>/dev/null | head -3
    done
    echo "== edge: $(grep -c 'bitwise equal' $X/edge.txt 2>/dev/null) bitwise equal (lib and lpt)," \
        "$(grep -c 'lpt order reference' $X/edge.txt 2>/dev/null) lpt references, $(grep -c DIFFERS $X/edge.txt 2>/dev/null) DIFFERS;" \
        "max lpt rel.diff to lib $(grep -oE 'rel.diff to lib [0-9.e+-]+' $X/edge.txt 2>/dev/null | awk '{print $4}' | sort -g | tail -1)"
    tail -1 $X/edge.txt 2>/dev/null
    echo "== perf (medians of 25, best of the 2 turns; lpt / lib, whole backward = prep + main + PDL convert)"
    grep -hE 'DIFFERS|rc=|failures' $X/perf_c.txt $X/perf_4k.txt 2>/dev/null
    grep -hE '\| bwd' $X/perf_c.txt $X/perf_4k.txt 2>/dev/null | cut -c1-120
    echo "-- the rule's points (S_kv 8k, 16k): keep LPT if WIN (mean <= 0.99, none > 1.01)"
    python3 $D/bwd_decide.py $X/perf_c.txt lpt --noslower 2>&1
    echo "-- S = 4k (the rule keeps the descending order there; lpt forced: expected slower)"
    python3 $D/bwd_decide.py $X/perf_4k.txt lpt --noslower 2>&1 | head -1
    echo "== tests"
    for t in t_bwd90 t_bwd90_lpt1 t_attn san_race san_sync; do
        [ -f $X/$t.txt ] || continue
        echo "-- $t: $(tail -1 $X/$t.txt)"
        grep -hE 'longest-first order:|determinism:|sm90 backward path:|FAIL|failed|ERROR SUMMARY|RACECHECK SUMMARY|passed|checks' \
            $X/$t.txt | grep -v '^ok ' | cut -c1-220 | head -8
    done
    echo "total $(at)"
} >$X/summary.txt 2>&1
cat $X/summary.txt
exit 0
