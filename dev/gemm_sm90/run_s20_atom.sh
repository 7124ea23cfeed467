#!/usr/bin/env bash
# Session 20: the split-K count-in as one atom.add.acq_rel.gpu instead of __threadfence + atomicAdd +
# __threadfence (two MEMBAR.SC.GPU -> one MEMBAR.ALL.GPU). Binaries built locally (90a-real, stripped, xz) in
# build-s20x/: camel-new (48a6b24), camel-atom and test_gpu_gemm-atom (this change).
# Steps: test_gpu_gemm; racecheck / synccheck / memcheck of the split-K and forced-configuration tests; camel bench
# gemm bf16 + tf32 (GPT-2 set, squares 1024-4096) new / atom in turns, ROUNDS rounds. Summary last.
#   bash dev/gemm_sm90/run_s20_atom.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s20x; timeout_s 600)
set -u
. "$(dirname "$0")/../carried.sh"
unpack
T=/tmp/bin/test_gpu_gemm-atom
(timeout 240 $T >$X/test.log 2>&1; echo "rc $?" >>$X/test.log) &
sanitize $T test_split_k test_sm90_configs
wait
tests_summary
in_turns ${ROUNDS:-6} "new atom" bench gemm --dtype bf16,tf32 --set gpt2,square --sizes 1024,2048,4096 --reps 20
python3 dev/gemm_sm90/s20_summary.py $X new atom >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
