#!/usr/bin/env bash
# Session 14's last device call: helper h14c's phased f32 loop for the other configurations (its A/B script), then
# the AdamW record again with PyTorch's fused step also timed as a CUDA-graph replay (bench/torch_adamw.py).
#   bash dev/s14_last.sh; tar czf $OUT/logs.tgz -C /tmp/x .          (run: timeout_s 600)
set -u
t0=$(date +%s)
DEADLINE=420 bash dev/gemm_f32/run_s14c.sh
X=/tmp/x
timeout 60 cmake --build build-s14c --target bench_adamw > $X/build_adamw.log 2>&1; echo "bench_adamw build rc=$? $(( $(date +%s)-t0 ))s"
(timeout 60 build-s14c/bench/bench_adamw --json $X/adamw_ours.json > $X/bench_adamw.log 2>&1 &&
 timeout 90 python3 bench/torch_adamw.py --json $X/adamw_torch.json > $X/torch_adamw.log 2>&1 &&
 python3 bench/torch_adamw.py --combine $X/adamw_ours.json $X/adamw_torch.json --out $X/adamw_h100.json > $X/adamw_table.md 2>&1)
echo "adamw rc=$? $(( $(date +%s)-t0 ))s"
cat $X/torch_adamw.log | tail -6; tail -6 $X/adamw_table.md
