#!/usr/bin/env bash
# Session 25: the SM clock of the GEMM kernels under sustained load (session 24's open question: do 132 busy SMs run
# at a lower clock than 96?). camel-tl = gemm_sm90.cu with -DCML_SM90_DEV_TIMELINE=1; its clock per launch is each
# CTA's clock64 over %globaltimer (timeline.py). Run once with every launch synchronized (the timeline runs of
# sessions 23-24) and once with CML_SM90_TL_EVERY=40 (only every 40th launch synchronized and written: the ones
# between run back to back, as in camel bench gemm), the bf16 GPT-2 set.
#   XDIR=build-s25x bash dev/gemm_sm90/run_s25_clock.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (carry build-s25x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-tl
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >$X/gpu.txt 2>&1
for v in sync sust; do
    mkdir -p $X/tl_$v
    if [ $v = sust ]; then export CML_SM90_TL_EVERY=40 REPS=100; else unset CML_SM90_TL_EVERY; REPS=3; fi
    CML_SM90_TL_DIR=$X/tl_$v timeout 200 /tmp/bin/camel-tl bench gemm --dtype bf16 --set gpt2 --reps $REPS \
        >$X/bench_$v.txt 2>&1
    stamp "timeline $v rc $?"
    python3 dev/gemm_sm90/timeline.py $X/tl_$v/tl_*.txt 2>&1 | grep "span" | sed 's/: .*x\([0-9]*\)x/ &/' >$X/clock_$v.txt
done
cat $X/stages.txt $X/gpu.txt
for v in sync sust; do echo "== $v"; sed 's|/tmp/x/tl_[a-z]*/tl_||; s/ starts spread.*//' $X/clock_$v.txt; done
