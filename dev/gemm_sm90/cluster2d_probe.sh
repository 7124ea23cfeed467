#!/usr/bin/env bash
# Session 8 device probe: 2-D clusters (A multicast along cluster rows, B along columns) against
# the kernel before them, in one call (dev/gemm_sm90/README.md, "Session 8"). Run from the
# repository root of a tree with session8_clusters_2d.patch applied (`git apply`), with the tree
# without it (the old kernel and harness) unpacked at $BASE:
#   BASE=/tmp/base bash dev/gemm_sm90/cluster2d_probe.sh        (LIB=0: no library; SAN=0: no sanitizers)
# 1. Builds, in parallel: the library (test_gpu_gemm, camel) on cores 8-15; harness binaries of one
#    op pair and one tile width each on cores 0-7: old TN / NT (every width, clusters 1 and 2), new
#    TN 192 / 128, NT 192 / 256, and TN 160 from a copy of the tree with
#    session8_narrow_on_2d.patch applied (the session-7 narrow tiles on top of the 2-D clusters).
# 2. Times the GPT-2 weight gradients (TN, K = 8192), 8192 x 768 x 768 NT and 4096^3 NT with old
#    and new configurations interleaved (median of 30, L2 flushed, ratio to cuBLAS in the same
#    process; a clustered run's D is compared bitwise with the 1x1 kernel's), plus small edge
#    shapes (tile grids the clusters do not divide, split K).
# 3. compute-sanitizer racecheck and memcheck on small 2 x 2 and 2 x 4 runs (SAN=0: none); then
#    test_gpu_gemm (LIB=0: no library build, no test).
# Logs in /tmp/x (tar them to $OUT); a summary table last.
set -u
logs=/tmp/x
mkdir -p "$logs"
base=${BASE:?BASE: the old tree}
t0=$SECONDS
if [ "${LIB:-1}" = 1 ]; then
    (cmake -S . -B /tmp/b -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >"$logs/cfg.log" 2>&1 &&
        taskset -c 8-15 cmake --build /tmp/b -j8 --target test_gpu_gemm camel >"$logs/build.log" 2>&1
    echo "library build rc=$? at $((SECONDS - t0)) s") &
    lib_pid=$!
fi
narrow=1
rm -rf /tmp/n && mkdir -p /tmp/n && cp -r include src dev /tmp/n/ &&
    (cd /tmp/n && patch -s -p1 <dev/gemm_sm90/session8_narrow_on_2d.patch) || { echo "narrow patch failed"; narrow=0; }
build() { # name dir flags...
    local name=$1 dir=$2
    shift 2
    (cd "$dir" && taskset -c 0-7 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc \
        -Xptxas=--warn-on-spills "$@" dev/gemm_sm90/harness.cu -lcublas -lcuda -o "$logs/h_$name" \
        >"$logs/nvcc_$name.log" 2>&1 || echo "nvcc $name failed: $(tail -3 "$logs/nvcc_$name.log")")
}
build old_tn "$base" -DHARNESS_ONLY_TN &
build old_nt "$base" -DHARNESS_ONLY_NT &
# the old harness on the new kernel (1x1 and 2x1 are meant to be the old code)
rm -rf /tmp/iso && mkdir -p /tmp/iso/dev/gemm_sm90 && cp -r include src /tmp/iso/ &&
    cp "$base/dev/gemm_sm90/harness.cu" /tmp/iso/dev/gemm_sm90/
build iso_tn /tmp/iso -DHARNESS_ONLY_TN &
build iso_nt /tmp/iso -DHARNESS_ONLY_NT &
build tn192 . -DHARNESS_ONLY_TN -DHARNESS_BN=192 -DHARNESS_NO_PP &
build tn128 . -DHARNESS_ONLY_TN -DHARNESS_BN=128 -DHARNESS_NO_PP &
[ $narrow = 1 ] && build tn160 /tmp/n -DHARNESS_ONLY_TN -DHARNESS_BN=160 -DHARNESS_NO_PP &
# the 2-D producer loops unrolled (they spill a few words) instead of looped
build tn192u . -DHARNESS_ONLY_TN -DHARNESS_BN=192 -DHARNESS_NO_PP -DCML_SM90_DEV_2D_UNROLL=4 &
build nt192u . -DHARNESS_ONLY_NT -DHARNESS_BN=192 -DHARNESS_NO_PP -DCML_SM90_DEV_2D_UNROLL=4 &
build nt192 . -DHARNESS_ONLY_NT -DHARNESS_BN=192 -DHARNESS_NO_PP &
build nt256 . -DHARNESS_ONLY_NT -DHARNESS_BN=256 -DHARNESS_NO_PP &
for j in $(jobs -p); do [ "$j" = "${lib_pid:-x}" ] || wait "$j"; done
echo "harness builds done at $((SECONDS - t0)) s"
grep -l "spill" "$logs"/nvcc_*.log 2>/dev/null | sed 's/^/spills in /'

# h BIN M N K OPA OPB BN GROUP_M CLUSTER [SPLITS] [REPS]; a binary that hung once runs no more
hung=" "
h() {
    [ -x "$logs/h_$1" ] || return 0
    case "$hung" in *" $1 "*) return 0 ;; esac
    taskset -c 0 timeout 30 "$logs/h_$1" "$2" "$3" "$4" "$5" "$6" "${11:-30}" "$7" "$8" "$9" tma - "${10:-1}" \
        >"$logs/one.log" 2>&1
    local rc=$?
    sed "s/^/$1 /" "$logs/one.log" >>"$logs/harness.log"
    [ $rc = 0 ] || echo "$*: rc=$rc $(tail -2 "$logs/one.log" | tr '\n' ' ')"
    if [ $rc = 124 ]; then hung="$hung$1 "; fi
}
# small edge shapes first (correctness: vs 1x1 must be 0, rel.diff small)
h tn192 296 520 640 T N 192 1 2x2 1 3
h tn192u 296 520 640 T N 192 4 2x4 3 3
h tn160 296 520 640 T N 160 1 2x2 1 3
h tn160 296 520 640 T N 160 4 2x4 3 3
h nt192u 296 712 640 N T 192 1 2x2 1 3
h nt256 296 712 640 N T 256 4 2x4 3 3
# dW 3072 x 768 x 8192 (96 tiles of 128 x 192, 120 of 128 x 160)
h old_tn 3072 768 8192 T N 192 16 1
h tn192 3072 768 8192 T N 192 16 1x1
h tn192 3072 768 8192 T N 192 16 2x2
h tn192u 3072 768 8192 T N 192 16 2x2
h tn192u 3072 768 8192 T N 192 16 2x4
h tn160 3072 768 8192 T N 160 16 1x1
h tn160 3072 768 8192 T N 160 16 4x1
h tn160 3072 768 8192 T N 160 16 8x1
h old_tn 3072 768 8192 T N 192 16 1
# dW 768 x 3072 x 8192 (6 x 16 tiles at 192, 6 x 20 at 160: 2 x 4 clusters as cuBLAS's)
h old_tn 768 3072 8192 T N 192 16 1
h tn192 768 3072 8192 T N 192 16 2x2
h tn192u 768 3072 8192 T N 192 16 2x2
h tn192u 768 3072 8192 T N 192 16 2x4
h tn160 768 3072 8192 T N 160 16 1x1
h tn160 768 3072 8192 T N 160 16 2x2
h tn160 768 3072 8192 T N 160 16 2x4
h old_tn 768 3072 8192 T N 192 16 1
# dW 2304 x 768 x 8192 (18 x 6 tiles at 128)
h old_tn 2304 768 8192 T N 128 16 1
h tn128 2304 768 8192 T N 128 16 2x2
h tn192u 2304 768 8192 T N 192 16 2x2
h old_tn 2304 768 8192 T N 128 16 1
# forward 8192 x 768 x 768 NT (K-major operands: no producer loops)
h old_nt 8192 768 768 N T 192 16 1
h nt192 8192 768 768 N T 192 16 1x1
h nt192 8192 768 768 N T 192 16 2x2
h nt192 8192 768 768 N T 192 16 2x4
h nt192 8192 768 768 N T 192 16 4x2
h old_nt 8192 768 768 N T 192 16 1
# 4096^3 NT
h old_nt 4096 4096 4096 N T 256 16 1
h nt256 4096 4096 4096 N T 256 16 2x2
h nt256 4096 4096 4096 N T 256 16 2x4
h nt256 4096 4096 4096 N T 256 16 4x2
h old_nt 4096 4096 4096 N T 256 16 2
echo "harness runs done at $((SECONDS - t0)) s"
# racecheck (shared memory) and memcheck (the general epilogue's element stores: nothing outside D)
[ "${SAN:-1}" = 1 ] && for c in "racecheck tn192 296 520 640 T N 1 192 1 2x2 tma" "racecheck nt192 296 712 640 N T 1 192 4 2x4 tma" \
    "memcheck nt192 296 712 640 N T 1 192 1 2x2 store" "memcheck tn128 296 520 640 T N 1 128 1 2x4 store"; do
    set -- $c
    tool=$1 b=$2
    shift 2
    timeout 120 compute-sanitizer --tool $tool "$logs/h_$b" "$@" - 3 >"$logs/${tool}_$b.log" 2>&1
    echo "$tool $b $*: rc=$? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|vs 1x1" "$logs/${tool}_$b.log" | tr '\n' ' ' | cut -c1-300)"
done
if [ "${LIB:-1}" = 1 ]; then
    wait "$lib_pid"
    if [ -x /tmp/b/tests/test_gpu_gemm ]; then
        timeout ${TEST_TIMEOUT:-150} /tmp/b/tests/test_gpu_gemm >"$logs/test_gpu_gemm.log" 2>&1
        echo "test_gpu_gemm rc=$? at $((SECONDS - t0)) s"
        grep -E "FAIL|forced|passed|failed|cases" "$logs/test_gpu_gemm.log" | tail -12
    else
        tail -30 "$logs/build.log"
    fi
fi
echo "== resident clusters =="
grep -h "resident clusters" "$logs/harness.log" | sort -u
echo "== summary: binary M x N x K, width, splits, group_m, cluster, ours ms, ratio to cuBLAS, D vs 1x1 =="
grep "ratio" "$logs/harness.log" | while read -r line; do
    echo "${line%% *} $(echo "$line" | grep -oE '[0-9]+ x +[0-9]+ x +[0-9]+' | tr -d ' ') $(echo "$line" |
        grep -oE 'bn=[0-9]+|s=[0-9]+|g=[0-9]+|c=[0-9x]+|ours [0-9.]+ ms|ratio [0-9.]+|rel.diff [0-9.e+-]+|vs 1x1: [0-9]+' | tr '\n' ' ')"
done
