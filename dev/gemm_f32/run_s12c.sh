#!/usr/bin/env bash
# Session 12 (helper h12c), one device call from the repository root (about 4-6 minutes):
#   bash dev/gemm_f32/run_s12c.sh            # DRY=1: no GPU; checks the patch applies and the summary code
# 1. source: this tree if it already has the switch (CML_F32_ASYNC in gemm_f32_tile.cuh), else a
#    copy of src/ with dev/gemm_f32/s12c.patch applied (/tmp/s12c/tree);
# 2. builds gemm_f32.cu twice (CML_F32_ASYNC=0: the old loop, 1: the cp.async loop; entry points
#    renamed _old / _new), ptxas -v of both, and dev/gemm_f32/s12c_bench.cu linked with both;
#    in the background the library's test_gpu_gemm_f32 with -DCML_F32_ASYNC=1 (every configuration,
#    split K, epilogues, batches, through cml_gemm);
# 3. runs s12c_bench (correctness of new vs float64, bitwise vs old; then old / new / cuBLAS timed
#    in turns, 2 rounds), then the test, then s12c_bench's checks under compute-sanitizer memcheck
#    (when the time left allows); logs in /tmp/s12c/logs (and $OUT/s12c_logs.tgz);
#    a short summary is printed LAST.
set -u
root=$(pwd)
w=/tmp/s12c
log=$w/logs
rm -rf "$w" && mkdir -p "$log"
dry=${DRY:-0}
deadline=${DEADLINE:-540}
left() { echo $((deadline - SECONDS)); }
patch=$root/dev/gemm_f32/s12c.patch

# ---- 1. the source with the switch ----
if grep -q CML_F32_ASYNC src/kernels/cuda/gemm/gemm_f32_tile.cuh; then
    tree=$root
    echo "source: this tree (already has CML_F32_ASYNC)"
else
    tree=$w/tree
    mkdir -p "$tree"
    tar -C "$root" --exclude='./build*' --exclude='./.git' -cf - . | tar -C "$tree" -xf -
    (cd "$tree" && git apply "$patch") || { echo "PATCH DOES NOT APPLY"; exit 1; }
    echo "source: $tree (s12c.patch applied)"
fi
grep -q CML_F32_ASYNC "$tree/src/kernels/cuda/gemm/gemm_f32_tile.cuh" || { echo "no switch in the source"; exit 1; }

summary() {
    echo "== s12c: ptxas (registers / spills of the 128x128x16 kernels, unsplit; any spill of the new build)"
    for v in old new; do
        awk -v v=$v '/Compiling entry/ {n=$0; sub(/.*gemm_f32_kernelIL/,"",n); sub(/Ev12f32.*/,"",n)}
             /spill/ {s=$0; sub(/.*frame, /,"",s)}
             /Used/ {r=$0; sub(/.*Used /,"",r); sub(/, used.*/,"",r);
                     if (n ~ /^i128ELi128ELi16/ && n ~ /b0E$/) printf "  %s %-40s %s, %s\n", v, n, r, s;
                     if (v == "new" && s !~ /^0 bytes spill stores, 0 bytes spill loads/) printf "  SPILL %s %s %s\n", v, n, s}' \
            "$log/ptxas_$v.txt" 2>/dev/null
    done
    grep -hE "error|C75[0-9][0-9]" "$log"/ptxas_*.txt "$log/bench_build.txt" 2>/dev/null | head -5
    echo "== s12c: library test (CML_F32_ASYNC=1): $(cat "$log/test_rc.txt" 2>/dev/null || echo 'not run')"
    echo "== s12c: $(cat "$log/memcheck_rc.txt" 2>/dev/null || echo 'memcheck not run')"
    grep -E "correctness|WRONG|FAILED|NOT TAKEN" "$log/bench.txt" 2>/dev/null | grep -v " 0 of " | head -12
    grep -E "round [0-9]:" "$log/bench.txt" 2>/dev/null | cut -c1-150
    sed -n '/== s12c summary/,$p' "$log/bench.txt" 2>/dev/null
    echo "(bench rc=$(cat "$log/bench_rc.txt" 2>/dev/null); logs: $log; total ${SECONDS}s)"
}

if [ "$dry" = 1 ]; then
    bash -n "$0" && echo "DRY: script parses"
    cat >"$log/ptxas_new.txt" <<'X'
ptxas info    : Compiling entry function '_Z15gemm_f32_kernelILi128ELi128ELi16ELi8ELb0ELb0ELi2ELb0EEv12f32_operands13cml__gemm_epi' for 'sm_90a'
ptxas info    : Function properties for _Z15gemm_f32_kernelILi128ELi128ELi16ELi8ELb0ELb0ELi2ELb0EEv12f32_operands13cml__gemm_epi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 127 registers, used 1 barriers
X
    sed 's/127 registers/128 registers/; s/0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads/16 bytes stack frame, 16 bytes spill stores, 32 bytes spill loads/' \
        "$log/ptxas_new.txt" >"$log/ptxas_old.txt"
    echo "rc=0 test_gpu_gemm_f32: (made up)" >"$log/test_rc.txt"
    printf 'correctness (pick, splits estimate): 0 of 48 cases wrong\n8192^3                   128x128x16/8x8   round 0: cuBLAS  51.50  old  46.20 (0.897)  new  48.00 (0.932)  new/old 1.039\n\n== s12c summary: correctness 0 of 384 cases wrong (made up)\nshape config\n8192^3 128x128x16/8x8 cuBLAS 51.50 | old 46.20 0.897 | new 48.00 0.932 | new/old 1.039\n' >"$log/bench.txt"
    echo 0 >"$log/bench_rc.txt"
    summary
    exit 0
fi

# ---- 2. builds ----
arch="-gencode=arch=compute_90a,code=sm_90a"
flags="-O3 -std=c++17 $arch -I $tree/src -I $tree/include -Xcompiler=-fno-exceptions,-fno-threadsafe-statics -DCML_HAVE_CUDA=1 -DNDEBUG"
rename() { # entry points of one build get a suffix
    local s=$1
    echo "-Dcml__gemm_f32=cml__gemm_f32$s -Dcml__gemm_f32_takes=cml__gemm_f32_takes$s \
-Dcml__gemm_f32_config_name=cml__gemm_f32_config_name$s -Dcml__gemm_f32_config_at=cml__gemm_f32_config_at$s \
-Dcml__gemm_f32_force_config=cml__gemm_f32_force_config$s -Dcml__gemm_f32_force_splits=cml__gemm_f32_force_splits$s \
-Dcml__gemm_f32_splits=cml__gemm_f32_splits$s -Dcml__gemm_f32_workspace_size=cml__gemm_f32_workspace_size$s"
}
if [ "${TEST:-1}" = 1 ]; then
    (nice -n 5 cmake -S "$tree" -B $w/build -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
        -DCMAKE_CUDA_FLAGS=-DCML_F32_ASYNC=1 >"$log/lib_build.txt" 2>&1 &&
        nice -n 5 cmake --build $w/build -j12 --target test_gpu_gemm_f32 >>"$log/lib_build.txt" 2>&1
     echo "lib build rc=$? at ${SECONDS}s" >>"$log/lib_build.txt") &
    lpid=$!
fi
nvcc $flags -Xptxas=-v -DCML_F32_ASYNC=0 $(rename _old) -c "$tree/src/kernels/cuda/gemm/gemm_f32.cu" -o $w/old.o \
    >"$log/ptxas_old.txt" 2>&1 &
p0=$!
nvcc $flags -Xptxas=-v -DCML_F32_ASYNC=1 $(rename _new) -c "$tree/src/kernels/cuda/gemm/gemm_f32.cu" -o $w/new.o \
    >"$log/ptxas_new.txt" 2>&1 &
p1=$!
wait $p0 $p1
nvcc -O3 -std=c++17 $arch -I "$tree/src" -I "$tree/include" "$root/dev/gemm_f32/s12c_bench.cu" $w/old.o $w/new.o -lcublas \
    -o $w/s12c_bench >"$log/bench_build.txt" 2>&1
echo "builds done at ${SECONDS}s"

# ---- 3. runs ----
if [ -x $w/s12c_bench ]; then
    timeout $(( $(left) - 90 )) $w/s12c_bench --reps ${REPS:-9} --rounds ${ROUNDS:-2} >"$log/bench.txt" 2>&1
    echo $? >"$log/bench_rc.txt"
else
    tail -20 "$log/bench_build.txt"
fi
if [ "${TEST:-1}" = 1 ]; then
    wait $lpid
    t=$(find $w/build -name test_gpu_gemm_f32 -type f -perm -u+x | head -1)
    if [ -n "$t" ] && [ $(left) -gt 20 ]; then
        timeout $(( $(left) - 10 )) "$t" >"$log/test.txt" 2>&1
        echo "rc=$? test_gpu_gemm_f32 $(tail -1 "$log/test.txt")" >"$log/test_rc.txt"
    else
        echo "not built or no time: $(grep -E 'error|rc=' "$log/lib_build.txt" | tail -3)" >"$log/test_rc.txt"
    fi
fi
if [ -x $w/s12c_bench ] && [ $(left) -gt 60 ] && command -v compute-sanitizer >/dev/null; then
    timeout $(( $(left) - 15 )) compute-sanitizer --tool memcheck --error-exitcode 99 $w/s12c_bench --no-timing \
        >"$log/memcheck.txt" 2>&1
    echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$log/memcheck.txt" | tail -1)" >"$log/memcheck_rc.txt"
fi
[ -n "${OUT:-}" ] && tar czf "$OUT/s12c_logs.tgz" -C "$log" . 2>/dev/null
summary
