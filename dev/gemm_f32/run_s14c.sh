#!/usr/bin/env bash
# Session 14 (helper h14c): one device call for the phased main loop on every f32 configuration.
# From the repo root, on the H100:
#     bash dev/gemm_f32/run_s14c.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# (timeout 600 s; the steps' deadlines keep it under ~450 s). DRY=1 checks the script here (no GPU:
# prints the commands, checks the files and the shell syntax).
#  1. background: cmake for sm_90a, target test_gpu_gemm_f32 only (the library comes with it);
#  2. meanwhile: gemm_f32.cu alone with -Xptxas=-v twice -- the chosen phases (L16 2, M 1, S 1,
#     T16 1) and an alternative (L16 4, M 2, S 2, T16 2: -DF32_P_*) -- each linked into s14c
#     (dev/gemm_f32/s14c.cu: new vs old loop IN TURNS against cublasSgemm, 3 rounds, squares
#     2048/4096/8192 NN + the 15 GPT-2 shapes with the estimate's pick, the changed configurations
#     forced on the dW shapes / 2048 NN / qkv fwd NT; bitwise D new vs old on every row);
#  3. s14c (chosen), then s14c_alt --changed-only (the alternative phases, same method);
#  4. test_gpu_gemm_f32 with CML_F32_OLD_LOOP=0 and =1 (its test_old_loop compares every
#     configuration's D bitwise between the loops);
#  5. SASS statistics of every f32 main loop (sass_loop.py), pick_sim.py on the measured gains;
#  6. the summary LAST.
set -u
log=${LOG:-/tmp/x}
mkdir -p "$log"
deadline=${DEADLINE:-440}
left() { echo $((deadline - SECONDS)); }
build=build-s14c
arch="-gencode=arch=compute_90a,code=sm_90a"
alt="-DF32_P_L16=4 -DF32_P_M=2 -DF32_P_S=2 -DF32_P_T16=2"
run() { if [ "${DRY:-0}" = 1 ]; then echo "DRY: $*"; else "$@"; fi; }
if [ "${DRY:-0}" = 1 ]; then
    for f in src/kernels/cuda/gemm/gemm_f32.cu src/kernels/cuda/gemm/gemm_f32_tile.cuh dev/gemm_f32/s14c.cu \
             dev/gemm_f32/f32_check.cu dev/gemm_f32/sass_loop.py dev/gemm_f32/pick_sim.py tests/gpu/test_gpu_gemm_f32.c; do
        [ -f "$f" ] || { echo "DRY: missing $f"; exit 1; }
    done
    bash -n "$0" && echo "DRY: syntax ok"
    grep -q cml__gemm_f32_force_old_loop src/kernels/cuda/cuda_kernels.h && echo "DRY: hook declared"
fi
(run cmake -S . -B $build -G Ninja -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
     >"$log/build.log" 2>&1 &&
 run cmake --build $build -j10 --target test_gpu_gemm_f32 >>"$log/build.log" 2>&1
 echo "build rc=$? at ${SECONDS}s" >>"$log/build.log") &
bpid=$!
nv() { run nvcc -O3 -std=c++17 $arch -I src -I include -Xcompiler=-fno-exceptions,-fno-threadsafe-statics \
           -DCML_HAVE_CUDA=1 -Xptxas=-v "$@"; }
(nv -c src/kernels/cuda/gemm/gemm_f32.cu -o /tmp/gemm_f32_s14c.o >"$log/ptxas.txt" 2>&1 &&
 run nvcc -O3 -std=c++17 $arch -I src -I include -I dev/gemm_f32 dev/gemm_f32/s14c.cu /tmp/gemm_f32_s14c.o \
     -lcublas -o /tmp/s14c >>"$log/ptxas.txt" 2>&1
 echo "s14c build rc=$? at ${SECONDS}s" >>"$log/ptxas.txt") &
cpid=$!
(nv $alt -c src/kernels/cuda/gemm/gemm_f32.cu -o /tmp/gemm_f32_s14c_alt.o >"$log/ptxas_alt.txt" 2>&1 &&
 run nvcc -O3 -std=c++17 $arch -I src -I include -I dev/gemm_f32 dev/gemm_f32/s14c.cu /tmp/gemm_f32_s14c_alt.o \
     -lcublas -o /tmp/s14c_alt >>"$log/ptxas_alt.txt" 2>&1
 echo "s14c_alt build rc=$? at ${SECONDS}s" >>"$log/ptxas_alt.txt") &
apid=$!
wait $cpid
tail -1 "$log/ptxas.txt"
echo "== s14c (at ${SECONDS}s)"
if [ "${DRY:-0}" = 1 ]; then
    echo "DRY: /tmp/s14c --reps ${REPS:-7} --rounds ${ROUNDS:-3} --label new"
elif [ -x /tmp/s14c ]; then
    timeout $(( $(left) - 170 )) /tmp/s14c --reps ${REPS:-7} --rounds ${ROUNDS:-3} --label new >"$log/s14c.txt" 2>&1
    echo "s14c rc=$? (at ${SECONDS}s)"
else
    tail -30 "$log/ptxas.txt"
fi
wait $apid
tail -1 "$log/ptxas_alt.txt"
if [ "${DRY:-0}" = 1 ]; then
    echo "DRY: /tmp/s14c_alt --reps ${REPS:-7} --rounds ${ROUNDS:-3} --label alt --changed-only"
elif [ -x /tmp/s14c_alt ] && [ $(left) -gt 200 ]; then
    timeout $(( $(left) - 150 )) /tmp/s14c_alt --reps ${REPS:-7} --rounds ${ROUNDS:-3} --label alt --changed-only \
        >"$log/s14c_alt.txt" 2>&1
    echo "s14c_alt rc=$? (at ${SECONDS}s)"
else
    echo "s14c_alt skipped (at ${SECONDS}s, $(left)s left)"
fi
wait $bpid
grep -E "error|FAILED|build rc" "$log/build.log" | tail -15
t=$build/tests/test_gpu_gemm_f32
for o in 0 1; do
    if [ "${DRY:-0}" = 1 ]; then echo "DRY: CML_F32_OLD_LOOP=$o $t"; continue; fi
    [ -x $t ] && [ $(left) -gt 40 ] || { echo "test_gpu_gemm_f32 (CML_F32_OLD_LOOP=$o) not run ($(left)s left)"; continue; }
    CML_F32_OLD_LOOP=$o timeout $(( $(left) - 30 < 120 ? $(left) - 30 : 120 )) ./$t >"$log/test_f32_old$o.log" 2>&1
    echo "test_gpu_gemm_f32 (CML_F32_OLD_LOOP=$o) rc=$? $(tail -1 "$log/test_f32_old$o.log")"
done
if [ "${DRY:-0}" != 1 ]; then
    for v in "" _alt; do
        [ -f /tmp/gemm_f32_s14c$v.o ] || continue
        (cuobjdump -sass /tmp/gemm_f32_s14c$v.o >"$log/sass$v.txt" 2>&1 &&
         python3 dev/gemm_f32/sass_loop.py "$log/sass$v.txt" --brief | sort -k1,1 -k2,2 -k3,3 \
            >"$log/sass_loop$v.txt") 2>>"$log/sass_loop$v.txt"
    done
    [ -f "$log/s14c.txt" ] && python3 dev/gemm_f32/pick_sim.py --from "$log/s14c.txt" >"$log/pick_sim.txt" 2>&1
    [ -f "$log/s14c_alt.txt" ] && python3 dev/gemm_f32/pick_sim.py --from "$log/s14c_alt.txt" >"$log/pick_sim_alt.txt" 2>&1
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >"$log/smi.txt" 2>&1
{
echo "== SASS main loops (static, per layout: instructions / register-port cycles a FFMA; P=0: the old loop)"
for v in "" _alt; do
    [ -f "$log/sass_loop$v.txt" ] || continue
    echo "-- build${v:- (chosen)}"
    python3 -c '
import re, sys, collections
d = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    m = re.match(r"(\S+) (NN|NT|TN|TT)( split)? P=(\d+)\s+insts\s+(\d+).*port-cycles/FFMA ([\d.]+)", l)
    if m: d[(m[1], m[4], bool(m[3]))][m[2]] = "%s/%s" % (m[5], m[6])
for (cfg, p, sp), v in sorted(d.items()):
    print("  %-16s P=%s %-7s %s" % (cfg, p, "split" if sp else "unsplit", "  ".join("%s %-10s" % (op, v.get(op, "-")) for op in ("NN", "NT", "TN", "TT"))))
' "$log/sass_loop$v.txt"
done
echo "== ptxas: the f32 kernels (registers unsplit / split per layout NN NT TN TT; spill bytes stored/loaded)"
for v in "" _alt; do
    [ -f "$log/ptxas$v.txt" ] || continue
    echo "-- build${v:- (chosen)}"
    grep -E "Compiling entry|registers|spill" "$log/ptxas$v.txt" | paste - - - | grep gemm_f32_kernel |
        perl -ne 'if (/kernelILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELb([01])ELb([01])ELi\d+ELb([01])ELi(\d+)E.*?(\d+) bytes spill stores, (\d+) bytes spill loads.*?Used (\d+) registers/) {
            printf "%sx%sx%s/%sx8 P=%s %s%s %s %s %s/%s\n", $1, $2, $3, $4, $8, $5 ? "T" : "N", $6 ? "T" : "N", $7, $11, $9, $10 }' |
        sort -u | python3 -c '
import sys, collections
d = collections.defaultdict(dict)
for l in sys.stdin:
    cfg, p, op, split, regs, sp = l.split()
    d[(cfg, p)][(op, split)] = (regs, sp)
for (cfg, p), v in sorted(d.items()):
    spills = sorted(set(x[1] for x in v.values()))
    print("  %-16s %-4s %s  spill %s" % (cfg, p, "  ".join("%s %s/%s" % (op, v.get((op, "0"), ("-",))[0], v.get((op, "1"), ("-",))[0])
          for op in ("NN", "NT", "TN", "TT")), ",".join(spills)))'
done
echo "== tests"
grep -hE "OLD_LOOP|compared with the old loop|tests? (passed|failed)|FAIL" "$log"/test_f32_old*.log 2>/dev/null | tail -12
echo "== pick_sim (rates scaled by the measured new/old of each configuration and layout class)"
grep -E "^  (L16|M |S |T16)|MOVES|measured|picks that move" "$log/pick_sim.txt" 2>/dev/null
[ -f "$log/pick_sim_alt.txt" ] && echo "-- with the alternative phases' gains" &&
    grep -E "^  (L16|M |S |T16)|MOVES|measured|picks that move" "$log/pick_sim_alt.txt"
echo "== summary (at ${SECONDS}s)"
grep -hE "^bitwise|DIFFERS" "$log/s14c.txt" "$log/s14c_alt.txt" 2>/dev/null
sed -n '/^== summary/,$p' "$log/s14c_alt.txt" 2>/dev/null
sed -n '/^== summary/,$p' "$log/s14c.txt" 2>/dev/null
} | tee "$log/summary.txt"
