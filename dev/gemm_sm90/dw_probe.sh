#!/usr/bin/env bash
# Device probe (session 7): tile configurations on the GPT-2 weight gradients (op TN, K = 8192).
# Builds the harness for TN only and times each CASES shape (M,N,K) with each CONFIGS entry
# (width,cluster; group_m 16, TMA-store epilogue) against cuBLAS in the same process (median of
# 30, L2 flushed), pinned to core 0. Widths 160 and 112 need session7_narrow_tiles.patch applied
# first (CONFIGS="192,1 128,1 160,1 160,2 112,1 112,2" was session 7's run). With LIB=1 (default)
# the library, test_gpu_gemm and camel build meanwhile on cores 2-15 (in $BUILD), then
# test_gpu_gemm runs; with TUNE=1 `camel tune gemm --set gpt2` writes its table of the GPT-2
# shapes to $OUT (not the source tree). Usage (device, repository root):
#   TUNE=1 bash dev/gemm_sm90/dw_probe.sh
set -u
logs=/tmp/dw
out=${OUT:-/tmp/dw-out}
build=${BUILD:-build-dw-gpu}
mkdir -p "$logs" "$out"
t0=$SECONDS
if [ "${LIB:-1}" = 1 ]; then
    (cmake -S . -B "$build" -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >"$logs/cfg.log" 2>&1 &&
        taskset -c 2-15 cmake --build "$build" -j14 --target test_gpu_gemm camel >"$logs/build.log" 2>&1
    echo "library build rc=$? at $((SECONDS - t0)) s") &
fi
if [ "${HARNESS:-1}" = 1 ]; then
    taskset -c 0,1 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -DHARNESS_ONLY_TN \
        dev/gemm_sm90/harness.cu -lcublas -lcuda -o "$logs/h" >"$logs/nvcc.log" 2>&1 || tail "$logs/nvcc.log"
    for case in ${CASES:-3072,768,8192 768,3072,8192 2304,768,8192}; do
        for cfg in ${CONFIGS:-192,1 192,2 128,1 128,2}; do
            set -- ${case//,/ } ${cfg//,/ }
            taskset -c 0 timeout 30 "$logs/h" $1 $2 $3 T N 30 $4 16 $5 tma 2>&1 | tee -a "$logs/harness.log"
        done
    done
fi
wait
if [ "${LIB:-1}" = 1 ]; then
    [ -x "$build/tests/test_gpu_gemm" ] || { tail -30 "$logs/build.log"; exit 1; }
    timeout ${TEST_TIMEOUT:-200} "$build/tests/test_gpu_gemm" >"$logs/test_gpu_gemm.log" 2>&1
    echo "test_gpu_gemm rc=$? at $((SECONDS - t0)) s"
    grep -E "FAIL|forced|passed|failed" "$logs/test_gpu_gemm.log" | tail -12
fi
if [ "${TUNE:-0}" = 1 ]; then
    timeout ${TUNE_TIMEOUT:-150} "$build/apps/camel/camel" tune gemm --dtype ${TUNE_DTYPES:-bf16,fp16} --set gpt2 \
        --out "$out/tuned_gpt2.inc" --json "$out/tune_gpt2.json" >"$logs/tune.log" 2>&1
    echo "tune rc=$? at $((SECONDS - t0)) s"
    grep -E "gpt2|geometric" "$logs/tune.log"
fi
tar czf "$out/dw_logs.tgz" -C "$logs" .
