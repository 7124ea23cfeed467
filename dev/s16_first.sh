#!/usr/bin/env bash
# Session 16's first device call (prepared in session 15, which had no device time left for it):
# 1. the post-review cross-entropy commit 73b0459 (NaN rows through the lse pairs, the lse alignment check, the PDL
#    chain through the one-pass backward) was never run on a GPU: build and run test_gpu_softmax and
#    test_gpu_pdl_chain, memcheck of test_gpu_softmax's sanitizer subset;
# 2. the ncu probe of cuDNN's SDPA kernel at D = 256 causal 512 (dev/attention_sm90/README.md, "Session 15").
#   bash dev/s16_first.sh; tar czf $OUT/logs.tgz -C /tmp/x .          (run: timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=/tmp/b16f
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    >$X/configure.log 2>&1
timeout 300 cmake --build $B -j16 --target test_gpu_softmax test_gpu_pdl_chain >$X/build.log 2>&1
stamp "build rc $?"
for t in test_gpu_softmax test_gpu_pdl_chain; do
    (cd $B/tests && timeout 150 ./$t >$X/$t.log 2>&1; echo "rc $?" >>$X/$t.log) &
done
wait
(cd $B/tests && CML_TEST_SANITIZER=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 \
    --report-api-errors no ./test_gpu_softmax >$X/san_memcheck_softmax.log 2>&1
    echo "rc $?" >>$X/san_memcheck_softmax.log)
stamp "tests: $(for f in $X/test_*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
timeout 200 ncu --section LaunchStats --section Occupancy --section SpeedOfLight \
    -k 'regex:(?i)(fmha|flash|cudnn|attn|sdpa|xmma|sm90|kernel_)' python3 dev/attention_sm90/cudnn_probe.py \
    >$X/ncu_cudnn_d256.txt 2>&1
stamp "ncu probe rc $?"
cat $X/stages.txt
grep -h "tests passed\|FAIL\|ERROR SUMMARY" $X/test_*.log $X/san_*.log | head
grep -E '^  [A-Za-z_].*\(|Grid Size|Block Size|Registers Per Thread|Dynamic Shared Memory Per Block|Static Shared|Waves Per SM|Duration|Theoretical Occupancy' \
    $X/ncu_cudnn_d256.txt | head -60
