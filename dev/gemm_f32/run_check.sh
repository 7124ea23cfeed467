#!/usr/bin/env bash
# On the GPU machine, in one call: builds camel and the f32 GEMM test (build-g2-gpu) while the
# ladder compiles, then times the ladder (arguments are passed to it), runs the GPU test, times
# `camel bench gemm --dtype f32 --set square`, and counts the SASS of the library's f32 kernels.
# Everything lands in $OUT (or /tmp/g2).
set -u
out=${OUT:-/tmp/g2}
mkdir -p "$out"
build=build-g2-gpu
(cmake -S . -B $build -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >"$out/build.log" 2>&1 &&
    cmake --build $build -j15 --target test_gpu_gemm_f32 camel >>"$out/build.log" 2>&1
 echo "build rc=$?" >>"$out/build.log") &
bpid=$!
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I src -I include -lineinfo -Xptxas=-v \
    dev/gemm_f32/sgemm_ladder.cu -lcublas -o /tmp/sgemm_ladder >/tmp/ladder_ptxas.txt 2>&1 || tail -20 /tmp/ladder_ptxas.txt
wait $bpid
grep -E "error|warning|build rc" "$out/build.log" | tail -20
[ -x /tmp/sgemm_ladder ] && /tmp/sgemm_ladder "$@" >"$out/ladder.txt" 2>&1
grep -v "^v1\|^v2\|^v3" "$out/ladder.txt" | cut -c1-80
if [ -x $build/tests/test_gpu_gemm_f32 ]; then
    ./$build/tests/test_gpu_gemm_f32 >"$out/test.log" 2>&1
    echo "test rc=$?"
    tail -25 "$out/test.log"
fi
if [ -x $build/apps/camel/camel ]; then
    ./$build/apps/camel/camel bench gemm --dtype f32 --set square --sizes 1024,2048,4096,8192 \
        --json "$out/gemm_f32.json" >"$out/bench.log" 2>&1
    echo "bench rc=$?"
    cat "$out/bench.log"
fi
obj=$(find $build -name 'gemm_f32.cu.o' | head -1)
if [ -n "$obj" ]; then
    cuobjdump -sass "$obj" >"$out/sass_f32.txt" 2>&1
    awk '/Function :/ {name=$3} /FFMA/ {f[name]++} /LDS.128/ {l[name]++} /LDL|STL/ {s[name]++}
         END {for (n in f) printf "%-70s FFMA=%d LDS.128=%d local=%d\n", n, f[n], l[n], s[n]}' "$out/sass_f32.txt"
fi
# compute-sanitizer on the test while the call's time lasts (LEFT: seconds this script may still use)
for tool in memcheck synccheck racecheck; do
    left=$(( ${G2_DEADLINE:-380} - SECONDS ))
    [ $left -lt 30 ] && { echo "$tool: skipped (no time left)"; continue; }
    CML_TEST_SANITIZER=1 timeout $left compute-sanitizer --tool $tool --error-exitcode 99 --report-api-errors no \
        ./$build/tests/test_gpu_gemm_f32 >"/tmp/$tool.log" 2>&1
    rc=$?
    cat "/tmp/$tool.log" >>"$out/sanitizer.log"
    echo "$tool rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|tests passed' "/tmp/$tool.log" | tr '\n' ' ')"
done
