#!/usr/bin/env bash
# Session 27: where 1024^3 loses (bf16 0.88 of cuBLASLt in the session-26 record). The tuner's quick pass over every
# configuration of the 16-bit squares 1024 / 2048; ncu of ours (the table's 64 x 128 c1, and forced c2) and
# cuBLASLt's kernel in isolation; timelines of ours at c1 and c2. Binaries built locally into build-s27x
# (s24_build_variant.sh: camel-force with -DCML_SM90_DEV_FORCE_ANY=1, camel-tl with -DCML_SM90_DEV_TIMELINE=1).
#   XDIR=build-s27x bash dev/gemm_sm90/run_s27_1024.sh   (carry build-s27x)
set -u
. "$(dirname "$0")/../carried.sh"
unpack camel-force camel-tl
C2=64,128,1,2,16,0,0
timeout 200 /tmp/bin/camel-force tune gemm --dtype bf16,fp16 --set square --sizes 1024,2048 --reps 40 \
    --json $X/tune.json >$X/tune.txt 2>&1
stamp "tune rc $?"
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
for v in c1 c2; do
    F=$([ $v = c2 ] && echo $C2 || echo none)
    CML_SM90_DEV_FORCE_ANY=$F timeout 120 ncu --clock-control none --kernel-name-base function -k 'regex:sm90|nvjet' \
        --section SpeedOfLight --section LaunchStats --metrics $M --csv --page raw /tmp/bin/camel-force bench gemm \
        --dtype bf16 --set square --sizes 1024 --reps 3 >$X/ncu_$v.csv 2>$X/ncu_$v.err
    stamp "ncu $v rc $?"
    python3 dev/gemm_sm90/ncu_launches.py $X/ncu_$v.csv >$X/ncu_$v.txt 2>&1
    mkdir -p $X/tl_$v
    CML_SM90_DEV_FORCE_ANY=$F CML_SM90_TL_DIR=$X/tl_$v timeout 60 /tmp/bin/camel-tl bench gemm --dtype bf16 \
        --set square --sizes 1024 --reps 5 >$X/tlbench_$v.txt 2>&1
    stamp "timeline $v rc $?"
    python3 dev/gemm_sm90/timeline.py $X/tl_$v/tl_*.txt >$X/tl_$v.txt 2>&1
done
python3 - $X/tune.json >$X/quick.txt <<'P'
import json, sys
for r in json.load(open(sys.argv[1]))['results']:
    s = r['shape']
    print(r['dtype'], s['M'], 'est', r['estimate'], r['estimate_ms'], 'best', r['best'], r['best_ms'], 'ref', r['ref_ms'])
    for q in sorted(r['quick'], key=lambda x: x[-1])[:12]:
        print('   ', q)
P
cat $X/stages.txt $X/quick.txt $X/ncu_c1.txt $X/ncu_c2.txt $X/tl_c1.txt $X/tl_c2.txt
