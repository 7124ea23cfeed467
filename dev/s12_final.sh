#!/usr/bin/env bash
# Session 12's verification call: the tree built for sm_90a (-Werror), every GPU test, the attention backward test again
# with CML_ATT_BWD_ASC=1 (every causal D = 64 / 128 case claims longest first) and under racecheck / synccheck
# (D = 128, ASC=1); the attention side by side for every D (bench/results/attention_h100.json) right after the build.
#   bash dev/s12_final.sh; tar czf $OUT/logs.tgz -C /tmp f12          (run: timeout_s 600)
set -u
L=/tmp/f12; mkdir -p $L; t0=$(date +%s); B=build-f12
at() { echo "$(( $(date +%s)-t0 ))s"; }
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null && timeout 250 cmake --build $B -j16) > $L/build.log 2>&1
echo "build rc=$? $(at); C75xx: $(grep -oE 'C75[0-9]+' $L/build.log | sort | uniq -c | tr '\n' ' ')"
grep -E "spill" $L/build.log | sed 's/.*function//' | sort -u | head -6
(cd bench && timeout 260 python3 attention_side_by_side.py --lib ../$B/src/libcamel.so --d 64,128,256 --s 2048,4096,8192,16384 \
   --causal both --ops fwd,fwd_bwd --reps 10 --json $L/attention_h100.json) > $L/att.log 2>&1; echo "attention rc=$? $(at)"
T() { local s=$(( 585 - ($(date +%s)-t0) )); [ $s -gt $1 ] && echo $1 || echo $s; }
timeout $(T 200) ctest --test-dir $B -L gpu -j4 --timeout 190 > $L/ctest.log 2>&1; echo "ctest gpu rc=$? $(at)"
grep -E "tests passed|Failed|\*\*\*|Not Run" $L/ctest.log | head -20
CML_ATT_BWD_ASC=1 timeout $(T 120) $B/tests/test_gpu_attention_bwd90 > $L/asc1.txt 2>&1; echo "bwd90 ASC=1 rc=$? $(at)"; tail -3 $L/asc1.txt
for tool in racecheck synccheck; do
  CML_ATT_BWD_ASC=1 CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=128 timeout $(T 60) compute-sanitizer --tool $tool --error-exitcode 9 \
    $B/tests/test_gpu_attention_bwd90 > $L/san_$tool.txt 2>&1
  echo "$tool rc=$? $(at): $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' $L/san_$tool.txt | tail -2 | tr '\n' ' ')"
done
grep -E "^(fwd|fwd_bwd) " $L/att.log
echo "total $(at)"
