#!/usr/bin/env bash
# Session 14's last verification call: the PDL rollout as merged (dev/membound/run_s14_pdlroll.sh: base = the tree
# with the patch reverted, new = the tree; tests of the touched ops, the chain test with memcheck / racecheck,
# camel bench membound base / new / CML_PDL=0 in turns, 3 rounds), then the membound record (PyTorch's
# bench/torch_membound.py in the same job, joined with new's last round into membound_h100.json) and the short-S
# attention side by side again (session 14's first run had outlier references at D = 64 causal).
#   bash dev/s14_final.sh; tar czf $OUT/logs.tgz -C /tmp/x .          (run: timeout_s 600)
set -u
t0=$(date +%s)
at() { echo "$(( $(date +%s)-t0 ))s"; }
ROUNDS=3 LIMIT=330 bash dev/membound/run_s14_pdlroll.sh
X=/tmp/x
last=$(ls $X/bench_new_*.json | sort | tail -1)
timeout 150 python3 bench/torch_membound.py --json $X/membound_torch.json > $X/bench_torch.log 2>&1
echo "torch_membound rc=$? $(at)"
python3 bench/torch_membound.py --combine $last $X/membound_torch.json --out $X/membound_h100.json \
    > $X/membound_table.md 2>&1; echo "combine ($last) rc=$? $(at)"
timeout 100 cmake --build /tmp/w14a/b --target camel_shared > $X/build_shared.log 2>&1; echo "camel_shared rc=$? $(at)"
(cd bench && timeout 90 python3 attention_side_by_side.py --lib /tmp/w14a/b/src/libcamel.so --d 64,128,256 --s 512,1024 \
   --causal both --ops fwd,fwd_bwd --reps 10 --json $X/attention_h100_short.json) > $X/att.log 2>&1
echo "attention short rc=$? $(at)"
grep -E "^(fwd|fwd_bwd) " $X/att.log
tail -25 $X/membound_table.md
echo "total $(at)"
