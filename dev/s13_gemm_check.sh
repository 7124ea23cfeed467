#!/usr/bin/env bash
# Session 13's last verification call: the tree (tf32 register-operand path landed; TMA stores of D only where a row
# ends on 16 bytes) built for sm_90a with -Werror, test_gpu_gemm alone first, then every GPU test, and memcheck /
# racecheck of the two new GEMM test groups (sanitizer shapes).
#   bash dev/s13_gemm_check.sh; tar czf $OUT/logs.tgz -C /tmp g13          (run: timeout_s 600)
set -u
L=/tmp/g13; mkdir -p $L; t0=$(date +%s); B=build-g13
at() { echo "$(( $(date +%s)-t0 ))s"; }
T() { local s=$(( 560 - ($(date +%s)-t0) )); [ $s -gt $1 ] && echo $1 || echo $s; }
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null && timeout 250 cmake --build $B -j16) > $L/build.log 2>&1
echo "build rc=$? $(at); C75xx: $(grep -oE 'C75[0-9]+' $L/build.log | sort | uniq -c | tr '\n' ' '); spill lines of gemm_sm90: $(grep -E 'spill' $L/build.log | grep -c gemm_sm90_kernel)"
timeout $(T 90) $B/tests/test_gpu_gemm > $L/gemm.txt 2>&1; echo "test_gpu_gemm rc=$? $(at)"
grep -E "^ok|^FAIL|RS launch|tests passed" $L/gemm.txt; grep -E "CHECK" $L/gemm.txt | head -5 | cut -c1-250
for t in tf32_rs tma_store_padding; do
  for tool in memcheck racecheck; do
    (CML_TEST_SANITIZER=1 CML_TEST_ONLY=$t timeout $(T 100) compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/test_gpu_gemm > $L/san_${t}_$tool.txt 2>&1;
     echo "rc=$?" >> $L/san_${t}_$tool.txt) &
  done
done
timeout $(T 230) ctest --test-dir $B -L gpu -j4 --timeout 220 > $L/ctest.log 2>&1; echo "ctest gpu rc=$? $(at)"
grep -E "tests passed|Failed|\*\*\*|Not Run" $L/ctest.log | head -20
wait
for f in $L/san_*.txt; do echo "$(basename $f): $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|tests passed' $f | tr '\n' ' ') $(tail -1 $f)"; done
echo "total $(at)"
