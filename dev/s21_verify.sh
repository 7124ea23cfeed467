#!/usr/bin/env bash
# Session 21, end: the final tree built whole for sm_90a with -Werror, then `ctest -L gpu` (every GPU test).
#   bash dev/s21_verify.sh      (timeout_s 600)
set -u
T0=$(date +%s)
B=build-verify
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/tmp/cfg.log 2>&1
timeout 330 cmake --build $B -j16 >/tmp/build.log 2>&1; echo "build rc $? at $(( $(date +%s) - T0 )) s"
grep -c 'spill' /tmp/build.log | sed 's/^/spill warnings: /'
grep -E 'error' /tmp/build.log | head -5
(cd $B && timeout 220 ctest -L gpu -j4 --output-on-failure 2>&1 | tail -8)
echo "ctest done at $(( $(date +%s) - T0 )) s"
