#!/bin/bash
# One device call of the ladder: `att check` and `att perf` per variant (separate processes, so a
# hang or a fault in one variant leaves the others' results), then optionally the SDPA reference.
# Logs under /tmp/x, tarred into $OUT/logs.tgz. Expects build-att/att (built here, carried).
#   VARIANTS="0 1 2 3 4" SDPA=1 dev/attention_sm90/run_device.sh
mkdir -p /tmp/x
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > /tmp/x/gpu.txt 2>&1
for v in ${VARIANTS:-0 1 2 3 4}; do
  timeout ${CHECK_T:-40} build-att/att check $v > /tmp/x/check$v.txt 2>&1; echo "check $v rc=$?" >> /tmp/x/check$v.txt
done
for v in ${VARIANTS:-0 1 2 3 4}; do
  timeout ${PERF_T:-45} build-att/att perf $v > /tmp/x/perf$v.txt 2>&1; echo "perf $v rc=$?" >> /tmp/x/perf$v.txt
done
if [ -n "$SDPA" ]; then timeout 150 python3 dev/attention_sm90/sdpa_ref.py > /tmp/x/sdpa.txt 2>&1; fi
tar czf $OUT/logs.tgz -C /tmp/x .
cat /tmp/x/gpu.txt
for v in ${VARIANTS:-0 1 2 3 4}; do grep -E "FAIL|failures|rc=|rror" /tmp/x/check$v.txt | head -12; done
for v in ${VARIANTS:-0 1 2 3 4}; do sed -n '/^----/,$p' /tmp/x/perf$v.txt | tail -n +2; grep -E "rc=[1-9]|rror" /tmp/x/perf$v.txt | head -3; done
cat /tmp/x/sdpa.txt 2>/dev/null | tail -8
