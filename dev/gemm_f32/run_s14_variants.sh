#!/usr/bin/env bash
# Session 14 (helper h14b): one device call for the 128x128x16/8x8 main-loop variants.
# From the repo root, on the H100:
#     bash dev/gemm_f32/run_s14_variants.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# (timeout 600 s; the steps' deadlines keep it under ~500 s). DRY=1 checks the script here (no
# GPU: prints the commands, checks the files and the shell syntax).
#  1. background: cmake for sm_90a, targets test_gpu_gemm_f32 only (the library comes with it);
#  2. meanwhile: gemm_f32.cu alone with -Xptxas=-v (registers / spills of the f32 kernels) and
#     s14_variants (dev/gemm_f32/s14_variants.cu: variants 0-3 vs cublasSgemm in turns, 3 rounds,
#     squares 2048/4096/8192 NN + the 15 GPT-2 shapes; bitwise check of every variant vs 0);
#  3. test_gpu_gemm_f32 under CML_F32_VARIANT=0 and =2 (its test_variants forces all four);
#  4. SASS statistics of the 128x128x16/8x8 loops (dev/gemm_f32/sass_loop.py);
#  5. the summary LAST.
set -u
log=/tmp/x
mkdir -p "$log"
deadline=${DEADLINE:-490}
left() { echo $((deadline - SECONDS)); }
build=build-s14b
arch="-gencode=arch=compute_90a,code=sm_90a"
run() { if [ "${DRY:-0}" = 1 ]; then echo "DRY: $*"; else "$@"; fi; }
if [ "${DRY:-0}" = 1 ]; then
    for f in src/kernels/cuda/gemm/gemm_f32.cu src/kernels/cuda/gemm/gemm_f32_tile.cuh dev/gemm_f32/s14_variants.cu \
             dev/gemm_f32/f32_check.cu dev/gemm_f32/sass_loop.py tests/gpu/test_gpu_gemm_f32.c; do
        [ -f "$f" ] || { echo "DRY: missing $f"; exit 1; }
    done
    bash -n "$0" && echo "DRY: syntax ok"
    grep -q cml__gemm_f32_force_variant src/kernels/cuda/cuda_kernels.h && echo "DRY: hook declared"
fi
(run cmake -S . -B $build -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
     >"$log/build.log" 2>&1 &&
 run cmake --build $build -j12 --target test_gpu_gemm_f32 >>"$log/build.log" 2>&1
 echo "build rc=$? at ${SECONDS}s" >>"$log/build.log") &
bpid=$!
(run nvcc -O3 -std=c++17 $arch -I src -I include -Xcompiler=-fno-exceptions,-fno-threadsafe-statics -DCML_HAVE_CUDA=1 \
     -Xptxas=-v -c src/kernels/cuda/gemm/gemm_f32.cu -o /tmp/gemm_f32_s14.o >"$log/ptxas.txt" 2>&1 &&
 run nvcc -O3 -std=c++17 $arch -I src -I include -I dev/gemm_f32 dev/gemm_f32/s14_variants.cu /tmp/gemm_f32_s14.o \
     -lcublas -o /tmp/s14_variants >>"$log/ptxas.txt" 2>&1
 echo "s14_variants build rc=$? at ${SECONDS}s" >>"$log/ptxas.txt") &
cpid=$!
wait $cpid
tail -1 "$log/ptxas.txt"
echo "== s14_variants (at ${SECONDS}s)"
if [ "${DRY:-0}" = 1 ]; then
    echo "DRY: /tmp/s14_variants --reps ${REPS:-7} --rounds ${ROUNDS:-3} --variants 0,1,2,3 --set square,gpt2"
elif [ -x /tmp/s14_variants ]; then
    timeout $(( $(left) - 150 )) /tmp/s14_variants --reps ${REPS:-7} --rounds ${ROUNDS:-3} --variants 0,1,2,3 \
        --set square,gpt2 >"$log/s14_variants.txt" 2>&1
    echo "s14_variants rc=$? (at ${SECONDS}s)"
else
    tail -30 "$log/ptxas.txt"
fi
wait $bpid
grep -E "error|FAILED|build rc" "$log/build.log" | tail -15
t=$build/tests/test_gpu_gemm_f32
for v in 0 2; do
    if [ "${DRY:-0}" = 1 ]; then echo "DRY: CML_F32_VARIANT=$v $t"; continue; fi
    [ -x $t ] && [ $(left) -gt 40 ] || continue
    CML_F32_VARIANT=$v timeout $(( $(left) - 30 < 90 ? $(left) - 30 : 90 )) ./$t >"$log/test_f32_v$v.log" 2>&1
    echo "test_gpu_gemm_f32 (CML_F32_VARIANT=$v) rc=$? $(tail -1 "$log/test_f32_v$v.log")"
done
if [ "${DRY:-0}" != 1 ] && [ -f /tmp/gemm_f32_s14.o ]; then
    (cuobjdump -sass /tmp/gemm_f32_s14.o >"$log/sass.txt" 2>&1 &&
     python3 dev/gemm_f32/sass_loop.py "$log/sass.txt" --match 128ELi128ELi16ELi8E --brief | sort -k2,2 -k3,3 \
        >"$log/sass_loop.txt") 2>>"$log/sass_loop.txt"
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >"$log/smi.txt" 2>&1
echo "== ptxas: the f32 kernels (registers, spills)"
grep -E "Compiling entry|registers|spill" "$log/ptxas.txt" 2>/dev/null | paste - - - |
    grep gemm_f32_kernel | perl -ne 'if (/kernelILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELb([01])ELb([01])ELi\d+ELb([01])ELi(\d)E.*?(\d+) bytes spill stores, (\d+) bytes spill loads.*?Used (\d+) registers/) {
        printf "%sx%sx%s/%sx8 %s%s split=%s var=%s: %s registers, spill %s/%s B\n", $1, $2, $3, $4, $5 ? "T" : "N", $6 ? "T" : "N", $7, $8, $11, $9, $10 }' |
    sort | uniq
echo "== SASS main loops (128x128x16/8x8)"
cat "$log/sass_loop.txt" 2>/dev/null
echo "== tests"
grep -hE "variant|tests? (passed|failed)|passed|FAIL" "$log"/test_f32_v*.log 2>/dev/null | tail -12
echo "== summary (at ${SECONDS}s)"
grep -E "^bitwise|DIFFERS" "$log/s14_variants.txt" 2>/dev/null
sed -n '/^== summary/,$p' "$log/s14_variants.txt" 2>/dev/null
