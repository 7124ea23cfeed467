#!/bin/bash
# Session 9 (helper h9f), one device call: the causal work order (ATT_T: K / V MiB per head group)
# and half diagonal key tiles (ATT_HALF) of the persistent forward. Binaries built on the local
# machine and carried: build-att/att (harness.cu), build-cuda/tests/test_gpu_attention,
# build-cuda/src/libcamel.so (optional). Logs under /tmp/x.
mkdir -p /tmp/x
A=build-att/att
# correctness under the knobs (float64 reference on sampled rows, poison, repeat bitwise)
for k in "16 1" "1 1"; do set -- $k
  ATT_T=$1 ATT_HALF=$2 timeout 40 $A check 5 > /tmp/x/check_T$1_H$2.txt 2>&1; echo "check 5 T=$1 half=$2 rc=$? $(tail -1 /tmp/x/check_T$1_H$2.txt)"
done
for sh in "3 1000 5 64 1 5 1000" "3 700 5 64 1 5 1000" "3 1000 5 64 1 5 700" "3 1000 5 128 1 5 1000" "2 4097 3 64 1 1 4097"; do
  ATT_T=1 ATT_HALF=1 timeout 30 $A one 5 $sh 3 | grep -E "rel.err" | sed 's/^/one T=1 half=1: /'
done
# the sweep: knobs T:half in turns, medians; the first pair (0:0) is the old order and full tiles
K="0:0 0:1 8:0 16:0 32:0 8:1 16:1 32:1"
for D in 64 128; do for c in 1 0; do for S in 2048 4096 8192 16384; do
  R=41; [ $D = 128 ] && R=21
  timeout 40 $A sweep $D $S $c $R $K >> /tmp/x/sweep.txt 2>&1 || echo "sweep D=$D S=$S c=$c rc=$?"
done; done; done
cat /tmp/x/sweep.txt
T=build-cuda/tests/test_gpu_attention
if [ -x $T ]; then
  timeout 60 $T > /tmp/x/test.txt 2>&1; echo "test_gpu_attention rc=$?"
  grep -E "FAIL|sm90 forward|passed|checks" /tmp/x/test.txt | head -12
  if [ -n "$SAN" ]; then # racecheck on the library test: ran past 110 s in session 4
    CML_TEST_SANITIZER=1 timeout ${SAN_T:-90} compute-sanitizer --tool racecheck --error-exitcode 9 $T > /tmp/x/san_racecheck.txt 2>&1
    echo "racecheck test rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL|sm90 forward" /tmp/x/san_racecheck.txt | head -5
  fi
fi
ATT_T=1 ATT_HALF=1 timeout 45 compute-sanitizer --tool racecheck $A quick 5 > /tmp/x/san_quick.txt 2>&1
echo "racecheck quick rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|failures" /tmp/x/san_quick.txt | head -3
grep -E "Race reported" -A3 /tmp/x/san_quick.txt | grep -E "at .*0x|in " | sort | uniq -c | head -6
