#!/bin/bash
# Session 16: issue 6's last forward miss (D = 256 causal S = 512). cuDNN's kernel there (ncu, session 16's first
# call) is persistent, 132 CTAs of 384 threads, tile 64 x 128 x 256 (two consumers x 64 rows, 128 keys), 232 KB of
# shared memory. Ours runs 128 x 80 key steps, which cover 1,440 key columns a head at causal 512 against the 1,280
# of 128-key (or 64-key) steps. s16_d256bn.patch compiles variants of the one-tile kernel, chosen by CML_ATT90_D256V:
# a = the library's (BN 80, 2 stages, INTRA); b = BN 64, 2 stages, INTRA; c = BN 128, 1 stage, no INTRA (ping-pong
# only); e = b + SKIP (causal: a consumer passes the key tiles past its last row); f = a + SKIP. (d = BN 128 with
# INTRA spills and serializes its wgmmas (C7512): not run.) Second run (VARS="a c g G" SANV=g): g = c + HALF (the last
# key tile computed at 64 keys where no row of the consumer sees its second half), G = g head by head (no grouped order).
# ONE device call:  bash dev/attention_sm90/run_s16_d256bn.sh; tar czf $OUT/logs.tgz -C /tmp/x .   (timeout_s 600)
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-560}
ROUNDS=${ROUNDS:-3}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=/tmp/x W=/tmp/w16a B=/tmp/b16a
mkdir -p $x
: >$x/summary.txt
say() { echo "$*" | tee -a $x/summary.txt; }
rm -rf $W && mkdir -p $W && tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
(cd $W && git apply dev/attention_sm90/s16_d256bn.patch) || { say "patch does not apply"; exit 1; }
VARS=${VARS:-"a b c e f"}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
cmake -S $W -B $B -G Ninja -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null 2>&1
timeout 300 cmake --build $B -j16 --target camel_shared test_gpu_attention >$x/build.log 2>&1
say "build rc=$? at $(at)"
T=$B/tests/test_gpu_attention
for v in $(echo $VARS | tr -d G); do
    (CML_ATT90_D256V=$v CML_TEST_ONLY=test_sm90_fwd CML_TEST_SM90_D=256 timeout 150 $T >$x/test_$v.log 2>&1
        echo "rc=$?" >>$x/test_$v.log) &
done
(CML_ATT90_D256V=${SANV:-e} CML_TEST_ONLY=test_sm90_fwd CML_TEST_SM90_D=256 CML_TEST_SANITIZER=1 timeout 150 \
    compute-sanitizer --tool racecheck --error-exitcode 99 --report-api-errors no $T >$x/race_e.log 2>&1
    echo "rc=$?" >>$x/race_e.log) &
(CML_ATT90_D256V=${SANV:-e} CML_TEST_ONLY=test_sm90_fwd CML_TEST_SM90_D=256 CML_TEST_SANITIZER=1 timeout 150 \
    compute-sanitizer --tool synccheck --error-exitcode 99 --report-api-errors no $T >$x/sync_e.log 2>&1
    echo "rc=$?" >>$x/sync_e.log) &
wait
for f in $x/test_*.log $x/race_e.log $x/sync_e.log; do
    say "$(basename $f .log): $(tail -1 $f) $(grep -h 'tests passed\|SUMMARY' $f | tr '\n' ' ')"
done
say "tests done at $(at)"
for r in $(seq 1 $ROUNDS); do
    [ $(left) -lt 60 ] && break
    vs=$VARS; [ $((r % 2)) = 0 ] && vs=$(echo $VARS | tr ' ' '\n' | tac | tr '\n' ' ')
    for v in $vs; do
        ev="CML_ATT90_D256V=$v"; [ $v = G ] && ev="CML_ATT90_D256V=g CML_ATT90_NOGROUP=1"
        (cd $W/bench && env $ev timeout 60 python3 attention_side_by_side.py --lib $B/src/libcamel.so \
            --d 256 --ops fwd --causal both --s 512,1024,2048 --reps 10) >$x/bench_${v}_$r.txt 2>&1
        echo "bench $v round $r rc=$? at $(at)" >>$x/summary.txt
    done
done
python3 - $x $VARS <<'PY' | tee -a $x/summary.txt
import glob, os, re, sys, math
x, vars_ = sys.argv[1], sys.argv[2:]
data = {}
for f in glob.glob(os.path.join(x, "bench_*_*.txt")):
    m = re.match(r"bench_(\w)_(\d+)\.txt$", os.path.basename(f))
    if not m or m.group(1) not in vars_: continue
    rows = {}
    for line in open(f):
        t = line.split()
        if len(t) == 9 and t[0] == "fwd" and t[3] in ("yes", "no"):
            rows[(int(t[1]), int(t[2]), t[3])] = tuple(map(float, t[4:7]))
    data[(m.group(1), int(m.group(2)))] = rows
rounds = sorted({r for _, r in data})
pts = sorted({p for rows in data.values() for p in rows}, key=lambda p: (p[2], p[1]))
geo = lambda q: math.exp(sum(map(math.log, q)) / len(q))
us = lambda p, tf: 4.0 * (16384 // p[1]) * (2048 // p[0]) * p[1] ** 2 * p[0] * (0.5 if p[2] == "yes" else 1) / tf / 1e6
print("X/a per round (geomean); /FA2 mean; us mean")
for p in pts:
    line = f"D={p[0]} S={p[1]:<5} {'causal' if p[2] == 'yes' else 'full  '}"
    for v in vars_:
        q = [data[(v, r)][p][0] / data[("a", r)][p][0] for r in rounds if p in data.get((v, r), {}) and p in data.get(("a", r), {})]
        f = [data[(v, r)][p] for r in rounds if p in data.get((v, r), {})]
        if f:
            line += f" | {v} {geo(q):.3f} /FA2 {sum(a[0] / a[1] for a in f) / len(f):.3f} {sum(us(p, a[0]) for a in f) / len(f):.1f}us"
    print(line)
PY
