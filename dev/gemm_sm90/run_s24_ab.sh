#!/usr/bin/env bash
# Session 24: stream-K where the cost estimate picks it (weight gradients of few tiles and long K), in turns against
# the same tree without it: camel-dp (-DCML_SM90_ESTIMATE_STREAM_K=0), camel-new, camel-fix16 (a helper's fixup
# counted as 16 K blocks instead of 8); the GPT-2 set at 8192 and 4096 tokens, bf16 and fp16, ROUNDS rounds
# (default 3). First test_gpu_gemm whole and the sanitizers of test_sm90_stream_k (TESTS=0: skipped).
#   XDIR=build-s24x bash dev/gemm_sm90/run_s24_ab.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s24x)
set -u
ROUNDS=${ROUNDS:-3}
VARIANTS=${VARIANTS:-dp new fix16}
. "$(dirname "$0")/../carried.sh"
unpack $(for v in $VARIANTS; do echo camel-$v; done) test_gpu_gemm
if [ "${TESTS:-1}" = 1 ]; then
    run_tests gemm
    sanitize /tmp/bin/test_gpu_gemm test_sm90_stream_k
    tests_summary
fi
for t in 8192 4096; do
    in_turns $ROUNDS "$VARIANTS" bench gemm --dtype ${DTYPES:-bf16,fp16} --set gpt2 --tokens $t --reps 20
    mkdir -p $X/t$t && mv $X/bench_* $X/t$t/
    python3 dev/gemm_sm90/s20_summary.py $X/t$t $VARIANTS >$X/summary_$t.txt 2>&1
done
cat $X/stages.txt
for t in 8192 4096; do echo "== $t tokens"; grep -v "^gpt2_fwd\|^gpt2_dx" $X/summary_$t.txt; done
