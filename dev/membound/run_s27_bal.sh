#!/usr/bin/env bash
# Session 27: nbw_kernel (LayerNorm / RMSNorm backward, 16-bit rows of 257..512 words: bf16 4096x4096) launched on the
# fewest blocks that keep the busiest group's row count (CML_NBW_BALANCED: 4096 rows on 128 blocks of 4 groups, 8 rows
# each, instead of 132 blocks where 128 of the 528 groups walk 7). camel-fd = the tree, camel-bal = the tree with the
# switch (s27_balanced.patch applied, dev/membound/s27_build_variant.sh bal "-DCML_NBW_BALANCED=1"); the norm tests of the variant, memcheck of test_wide_rows, then camel bench
# membound in turns.   XDIR=build-s27x bash dev/membound/run_s27_bal.sh   (carry build-s27x)
set -u
V=${V:-bal}
. "$(dirname "$0")/../carried.sh"
unpack camel-fd camel-$V test_gpu_layernorm-$V test_gpu_rmsnorm-$V
mv /tmp/bin/test_gpu_layernorm-$V /tmp/bin/test_gpu_layernorm && mv /tmp/bin/test_gpu_rmsnorm-$V /tmp/bin/test_gpu_rmsnorm
run_tests layernorm rmsnorm
TOOLS="memcheck" sanitize /tmp/bin/test_gpu_layernorm test_wide_rows
tests_summary
in_turns ${ROUNDS:-5} "fd $V" bench membound --ops layernorm_bwd,rmsnorm_bwd --mode both
python3 dev/membound/ab_summary.py $X fd >$X/summary.txt 2>&1
cat $X/stages.txt $X/summary.txt
mkdir -p ${OUT:-/tmp/out} && tar czf ${OUT:-/tmp/out}/s27_$V.tgz -C $X .
