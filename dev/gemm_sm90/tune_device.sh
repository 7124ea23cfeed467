#!/usr/bin/env bash
# One device call: build camel and test_gpu_gemm, run the GEMM tests, `camel tune gemm`
# (table into the source tree and $OUT), rebuild with the table, `camel bench gemm` on the
# tuned sets. Usage (on the GPU machine): COMMIT=<hash> TUNE_ARGS="..." dev/gemm_sm90/tune_device.sh
set -u
out=${OUT:-/tmp/tune-out}
logs=/tmp/tune-logs
mkdir -p "$out" "$logs"
build=build-tune
commit=${COMMIT:-unknown}
table=src/kernels/cuda/gemm/gemm_sm90_tuned.inc
step() { echo "== $* ($(date +%T))"; }
step configure+build
cmake -S . -B $build -G Ninja -DCML_WERROR=ON -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
    >"$logs/configure.log" 2>&1 || { tail -20 "$logs/configure.log"; exit 1; }
cmake --build $build -j16 --target camel test_gpu_gemm >"$logs/build.log" 2>&1 || { tail -30 "$logs/build.log"; exit 1; }
if [ "${SKIP_TEST:-0}" != 1 ]; then
    step test_gpu_gemm
    timeout 300 $build/tests/test_gpu_gemm >"$logs/test_gpu_gemm.log" 2>&1; echo "test_gpu_gemm rc=$?"
    grep -E "FAIL|forced|cases;|passed|failed" "$logs/test_gpu_gemm.log" | tail -8
    if [ "${SANITIZE:-0}" = 1 ]; then # the split-K and forced-configuration tests under compute-sanitizer
        for tool in memcheck racecheck synccheck; do
            CML_TEST_SANITIZER=1 CML_TEST_ONLY=${SAN_ONLY:-sm90_configs} timeout 300 compute-sanitizer --tool $tool \
                $build/tests/test_gpu_gemm >"$logs/san_$tool.log" 2>&1
            echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/san_$tool.log" | tail -1)"
        done
    fi
fi
if [ "${TUNE:-1}" = 1 ]; then
    step tune
    timeout ${TUNE_TIMEOUT:-300} $build/apps/camel/camel tune gemm ${TUNE_ARGS:-} --commit "$commit" \
        --out "$table" --json "$out/gemm_tune_h100.json" >"$logs/tune.log" 2>&1
    echo "tune rc=$?"
    cp "$table" "$out/gemm_sm90_tuned.inc"
    step rebuild with the table
    cmake --build $build -j16 --target camel >"$logs/build2.log" 2>&1 || { tail -30 "$logs/build2.log"; exit 1; }
fi
if [ "${BENCH:-1}" = 1 ]; then
    step bench
    timeout ${BENCH_TIMEOUT:-200} $build/apps/camel/camel bench gemm ${BENCH_ARGS:-} --commit "$commit" \
        --json "$out/gemm_bench_h100.json" >"$logs/bench.log" 2>&1
    echo "bench rc=$?"
fi
tar czf "$out/logs.tgz" -C "$logs" .
step summary
[ -f "$logs/tune.log" ] && tail -n 40 "$logs/tune.log"
[ -f "$logs/bench.log" ] && grep -A30 "^summary" "$logs/bench.log"
if [ -n "${NCU_SHAPE:-}" ]; then # harness arguments under ncu (reps 1): ours (harness) and cuBLAS's kernel, speed of light + stalls
    nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc dev/gemm_sm90/harness.cu -lcublas -lcuda \
        -o /tmp/h >/dev/null 2>&1
    timeout 120 ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
        --launch-skip 4 --launch-count 2 /tmp/h $NCU_SHAPE >"$logs/ncu.log" 2>&1
    tar czf "$out/logs.tgz" -C "$logs" .
    grep -E "gemm|Kernel|sm90|Duration|Throughput|Stall|Issued|Warp Cycles|Registers|Grid Size|Cluster" "$logs/ncu.log" | head -80
fi
