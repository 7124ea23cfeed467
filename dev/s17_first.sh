#!/usr/bin/env bash
# Session 17's first device call (prepared in session 16, whose device time ran out): confirm the D = 256 forward's
# 128-key form (commit 87d136f, rule 15a0fcb) on what issue 6 names beyond the forward timing:
# 1. the constant-time check (camel bench attention --timing-check) at D = 256, B 8 S 512 H 8 (causal and full take
#    the 128-key form) and B 4 S 2048 H 8 (session 11's shape; causal takes it);
# 2. forward+backward side by side at D = 256, S 512..16k, causal both (the forward part changed; the tables in
#    docs/PERFORMANCE.md are session 12's / 14's).
# If |t| < 4.5 everywhere and fwd+bwd >= 1.0x cuDNN at S >= 2k, issue 6's targets are all measured on today's code.
#   bash dev/s17_first.sh; tar czf $OUT/logs.tgz -C /tmp/x .          (run: timeout_s 600)
set -u
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=/tmp/b17f
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    >$X/configure.log 2>&1
timeout 280 cmake --build $B -j16 --target camel camel_shared >$X/build.log 2>&1
stamp "build rc $?"
c=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
for s in 8,512,8,256 4,2048,8,256; do
    n=$(echo $s | tr , _)
    timeout 120 $B/apps/camel/camel bench attention --timing-check --tc-shape $s --commit $c \
        --json $X/attention_timing_$n.json >$X/tc_$n.log 2>&1
    stamp "timing check $s rc $?"
done
(cd bench && timeout 200 python3 attention_side_by_side.py --lib $B/src/libcamel.so --d 256 --ops fwd,fwd_bwd \
    --causal both --s 512,1024,2048,4096,8192,16384 --reps 10 --json $X/att_d256_fwd_bwd.json --commit $c) \
    >$X/bench_fwd_bwd.txt 2>&1
stamp "side by side rc $?"
cat $X/stages.txt
for f in $X/tc_*.log; do echo "== $f"; tail -12 $f; done
cat $X/bench_fwd_bwd.txt
