#!/usr/bin/env bash
# Session 12, the pair-K D = 256 backward in the library (attention_bwd_sm90.cu): build for sm_90a (-Werror),
# the backward's GPU test (every D; negative scales now), compute-sanitizer on its D = 256 cases, the
# harness edge shapes (lib = the one-CTA D = 256 kernel vs pair; negative scales with a correct forward now),
# then the D = 256 side by side against cuDNN / FA2 (fwd_bwd, causal and full).
#   bash dev/s12_check.sh; tar czf $OUT/logs.tgz -C /tmp s12     (run: timeout_s 600; carry build-att)
set -u
L=/tmp/s12; mkdir -p $L; t0=$(date +%s); B=build-s12
at() { echo "$(( $(date +%s)-t0 ))s"; }
(cmake -S . -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null &&
 timeout 250 cmake --build $B -j16 --target camel_shared test_gpu_attention_bwd90 test_gpu_attention) > $L/build.log 2>&1
echo "build rc=$? $(at); C75xx: $(grep -oE 'C75[0-9]+' $L/build.log | sort | uniq -c | tr '\n' ' ')"
grep -E "error|spill stores [1-9]" $L/build.log | head -5
build-att/h12a_9 edge > $L/edge.txt 2>&1; echo "harness edge rc=$? $(at)"
grep -E "DIFFERS|non-finite|failures" $L/edge.txt | head -12
timeout 150 $B/tests/test_gpu_attention_bwd90 > $L/bwd90.txt 2>&1; echo "test_gpu_attention_bwd90 rc=$? $(at)"
tail -4 $L/bwd90.txt
for tool in memcheck racecheck synccheck; do
  CML_TEST_SANITIZER=1 CML_TEST_ONLY_D=256 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 \
    $B/tests/test_gpu_attention_bwd90 > $L/san_$tool.txt 2>&1
  echo "$tool rc=$? $(at): $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' $L/san_$tool.txt | tail -2 | tr '\n' ' ')"
done
s=$(( 560 - ($(date +%s)-t0) ))
(cd bench && timeout $s python3 attention_side_by_side.py --lib ../$B/src/libcamel.so --d 256 --s 2048,4096,8192,16384 \
   --causal both --ops fwd_bwd --reps 10 --json $L/attention_d256.json) > $L/att.log 2>&1; echo "attention rc=$? $(at)"
grep -E "^(fwd|fwd_bwd) " $L/att.log
echo "total $(at)"
