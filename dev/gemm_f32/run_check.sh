#!/usr/bin/env bash
# On the GPU machine, in one call (about 6 minutes at most):
#   1. in the background: builds camel and the f32 GEMM test (build-f32-gpu);
#   2. meanwhile builds and runs f32_check (the library file alone vs cuBLAS: every tile
#      configuration forced on odd shapes, then timed on the bench's shapes; its arguments
#      come from F32_CHECK_ARGS) and, with LADDER=1, the ladder's main loops (v6, v8, v12 at
#      2048-8192);
#   3. then the GPU tests (test_gpu_gemm_f32, test_gpu_gemm), `camel bench gemm --dtype f32
#      --set square,gpt2,batched --sizes 2048,4096,8192`, compute-sanitizer memcheck on the
#      f32 test (CML_TEST_SANITIZER=1), and SASS counts of the library's f32 kernels.
# Logs land in $OUT/logs.tgz; a summary is printed last. Each step has a deadline so the
# call ends inside DEADLINE seconds (default 380).
set -u
out=${OUT:-/tmp/f32out}
log=/tmp/f32logs
mkdir -p "$out" "$log"
deadline=${DEADLINE:-380}
left() { echo $((deadline - SECONDS)); }
build=build-f32-gpu
arch="-gencode=arch=compute_90a,code=sm_90a"
(cmake -S . -B $build -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >"$log/build.log" 2>&1 &&
    cmake --build $build -j13 --target test_gpu_gemm_f32 test_gpu_gemm camel >>"$log/build.log" 2>&1
 echo "build rc=$? at ${SECONDS}s" >>"$log/build.log") &
bpid=$!
(nvcc -O3 -std=c++17 $arch -I src -I include -Xcompiler=-fno-exceptions,-fno-threadsafe-statics -DCML_HAVE_CUDA=1 \
    -Xptxas=-v -c src/kernels/cuda/gemm/gemm_f32.cu -o /tmp/gemm_f32.o >"$log/ptxas_lib.txt" 2>&1 &&
    nvcc -O3 -std=c++17 $arch -I src -I include dev/gemm_f32/f32_check.cu /tmp/gemm_f32.o -lcublas -o /tmp/f32_check \
    >>"$log/ptxas_lib.txt" 2>&1) &
cpid=$!
[ "${LADDER:-0}" = 1 ] && nvcc -O3 -std=c++17 $arch -I src -I include -DLADDER_FAST dev/gemm_f32/sgemm_ladder.cu \
    -lcublas -o /tmp/sgemm_ladder >"$log/ladder_build.txt" 2>&1
wait $cpid
echo "== f32_check (at ${SECONDS}s)"
if [ -x /tmp/f32_check ]; then
    timeout $(( $(left) - 200 )) /tmp/f32_check ${F32_CHECK_ARGS:-} >"$log/f32_check.txt" 2>&1
    echo "f32_check rc=$?"
else
    tail -20 "$log/ptxas_lib.txt"
fi
echo "== ladder (at ${SECONDS}s)"
[ -x /tmp/sgemm_ladder ] && timeout 40 /tmp/sgemm_ladder --sizes 2048,4096,8192 --reps 9 --versions 1,2,3 \
    >"$log/ladder.txt" 2>&1
wait $bpid
grep -E "error|FAILED|build rc" "$log/build.log" | tail -15
if [ -x $build/tests/test_gpu_gemm_f32 ]; then
    timeout 60 ./$build/tests/test_gpu_gemm_f32 >"$log/test_f32.log" 2>&1
    echo "test_gpu_gemm_f32 rc=$? $(tail -1 "$log/test_f32.log")"
fi
if [ -x $build/apps/camel/camel ]; then
    timeout 90 ./$build/apps/camel/camel bench gemm --dtype f32 --set square,gpt2,batched --sizes 2048,4096,8192 \
        --json "$log/gemm_f32.json" >"$log/bench.log" 2>&1
    echo "bench rc=$?"
fi
if [ -x $build/tests/test_gpu_gemm ] && [ $(left) -gt 120 ]; then
    timeout 60 ./$build/tests/test_gpu_gemm >"$log/test_gemm.log" 2>&1
    echo "test_gpu_gemm rc=$? $(tail -1 "$log/test_gemm.log")"
fi
if [ -x $build/tests/test_gpu_gemm_f32 ] && [ $(left) -gt 30 ]; then
    CML_TEST_SANITIZER=1 timeout $(( $(left) - 10 )) compute-sanitizer --tool memcheck --error-exitcode 99 \
        --report-api-errors no ./$build/tests/test_gpu_gemm_f32 >"$log/memcheck.log" 2>&1
    echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$log/memcheck.log" | tail -1)"
fi
obj=$(find $build -name 'gemm_f32.cu.o' | head -1)
if [ -n "$obj" ]; then
    cuobjdump -sass "$obj" >"$log/sass_f32.txt" 2>&1
    awk '/Function :/ {name=$3} /FFMA/ {f[name]++} /LDS.128/ {l[name]++} /LDL|STL/ {s[name]++}
         END {for (n in f) printf "%-70s FFMA=%d LDS.128=%d local=%d\n", n, f[n], l[n], s[n]}' "$log/sass_f32.txt" \
        >"$log/sass_counts.txt"
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >"$log/smi.txt" 2>&1
tar czf "$out/logs.tgz" -C "$log" .
echo "== summary (at ${SECONDS}s)"
grep -E "correctness|odd shapes" "$log/f32_check.txt" 2>/dev/null
sed -n '/^timing/,$p' "$log/f32_check.txt" 2>/dev/null | cut -c1-200
grep -E "^cuBLAS|^v6|^v8|^v12" "$log/ladder.txt" 2>/dev/null
grep -E "f32|geomean|gmean" "$log/bench.log" 2>/dev/null | cut -c1-150 | tail -30
