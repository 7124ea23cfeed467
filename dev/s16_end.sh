#!/usr/bin/env bash
# Session 16's closing device call: the 128-key D = 256 forward (att90_cfg<256>, HALF, head-by-head order at
# causal S_kv <= 512) on the final tree. Build (sm_90a, -Werror), then at once: ctest -L gpu, test_sm90_fwd on the
# 80-key form (CML_ATT_FWD_D256K128=0), racecheck + synccheck of the D = 256 forward shapes; then, alone on the
# GPU, bench/attention_side_by_side.py D = 256 fwd, S 512..16k, causal both: new (default) / old (=0) in turns,
# ROUNDS rounds; the new runs' JSON kept for the record.
#   bash dev/s16_end.sh; tar czf $OUT/logs.tgz -C /tmp/x .          (run: timeout_s 600)
set -u
T0=$(date +%s)
ROUNDS=${ROUNDS:-2}
el() { echo $(($(date +%s) - T0)); }
X=/tmp/x B=/tmp/b16e
rm -rf $X && mkdir -p $X
stamp() { echo "[$(el) s] $*" | tee -a $X/stages.txt; }
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    >$X/configure.log 2>&1
timeout 280 cmake --build $B -j16 >$X/build.log 2>&1
stamp "build rc $?; C75xx: $(grep -oE '\(C75[0-9]+\)' $X/build.log | sort | uniq -c | tr '\n' ' ')"
T=$B/tests/test_gpu_attention
(cd $B && timeout 230 ctest -L gpu -j4 --output-on-failure >$X/ctest.log 2>&1; echo "rc $?" >>$X/ctest.log) &
(CML_ATT_FWD_D256K128=0 CML_TEST_ONLY=test_sm90_fwd CML_TEST_SM90_D=256 timeout 200 $T >$X/test_k80.log 2>&1
    echo "rc $?" >>$X/test_k80.log) &
(for tool in racecheck synccheck; do
    CML_TEST_ONLY=test_sm90_fwd CML_TEST_SM90_D=256 CML_TEST_SANITIZER=1 timeout 100 compute-sanitizer --tool $tool \
        --error-exitcode 99 --report-api-errors no $T >$X/san_$tool.log 2>&1
    echo "rc $?" >>$X/san_$tool.log
done) &
wait
stamp "ctest: $(grep -E 'tests passed|tests failed' $X/ctest.log) $(tail -1 $X/ctest.log); k80 $(tail -1 $X/test_k80.log) $(grep -h 'tests passed' $X/test_k80.log); racecheck $(tail -1 $X/san_racecheck.log) $(grep -h 'SUMMARY' $X/san_racecheck.log); synccheck $(tail -1 $X/san_synccheck.log) $(grep -h 'SUMMARY' $X/san_synccheck.log)"
grep -E "Failed|\*\*\*" $X/ctest.log | head
for r in $(seq 1 $ROUNDS); do
    for v in new old; do
        [ $(el) -gt 500 ] && break 2
        e=""; [ $v = old ] && e="CML_ATT_FWD_D256K128=0"
        (cd bench && env $e timeout 70 python3 attention_side_by_side.py --lib $B/src/libcamel.so --d 256 --ops fwd \
            --causal both --s 512,1024,2048,4096,8192,16384 --reps 10 --json $X/att_${v}_$r.json --commit s16) \
            >$X/bench_${v}_$r.txt 2>&1
        stamp "bench $v round $r rc $?"
    done
done
python3 - $X <<'PY'
import glob, os, re, sys, math
x = sys.argv[1]
data = {}
for f in glob.glob(os.path.join(x, "bench_*_*.txt")):
    v, r = re.match(r"bench_(\w+)_(\d+)\.txt$", os.path.basename(f)).groups()
    for line in open(f):
        t = line.split()
        if len(t) == 9 and t[0] == "fwd" and t[3] in ("yes", "no"):
            data.setdefault((int(t[2]), t[3]), {}).setdefault(v, []).append(tuple(map(float, t[4:9])))
geo = lambda q: math.exp(sum(map(math.log, q)) / len(q))
print("D = 256 fwd: new / old TF/s per round (geomean); /FA2 and /cuDNN of new (means)")
for (S, c), d in sorted(data.items(), key=lambda k: (k[0][1], k[0][0])):
    if "new" in d and "old" in d:
        q = [a[0] / b[0] for a, b in zip(d["new"], d["old"])]
        print(f"  S={S:<6} {'causal' if c == 'yes' else 'full  '} new/old {' '.join(f'{a:.3f}' for a in q)} ({geo(q):.3f})"
              f"  /FA2 {sum(a[3] for a in d['new']) / len(d['new']):.3f}  /cuDNN {sum(a[4] for a in d['new']) / len(d['new']):.3f}")
PY
