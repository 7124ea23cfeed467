#!/bin/bash
# Session 17 A/B/C (helper h17g, dev/gemm_sm90/README.md, "Session 17 (helper h17g): stream order with 2-CTA
# clusters"): the GPT-2 weight gradients 3072x768x8192 and 768x3072x8192 (bf16 TN) three ways in ONE build of the
# patched tree (s17_dwc.patch), chosen per process by CML_SM90_DW_STREAM:
#   0 = today's plan (128 x 192, 96 CTAs, cluster 1: the library's default, the same PTX as HEAD),
#   1 = h12f's stream order on single CTAs (128 CTAs, 3/4 of a tile's K blocks each),
#   2 = the stream order on clusters of 2 (64 clusters = 128 CTAs, 256 x 192 cluster tiles, B multicast).
# One device call from the repository root of the lead's tree (this script and the patch are all it needs;
# run with timeout_s 600):
#   bash dev/gemm_sm90/run_s17_dwc.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# Steps: a copy of this tree in $W with the patch applied (or as is, if this tree already has it); one build
# (camel, test_gpu_gemm, camel_shared; -j16); ptxas C75xx / spill lines of the GEMM kernels; test_gpu_gemm (the
# forced stream cases at clusters 1 and 2 against the float64 reference, each repeated bitwise, and both dW shapes
# through the switch's three modes); then `camel bench gemm --dtype bf16 --set gpt2 --reps 30` with
# CML_SM90_DW_STREAM=0 / 1 / 2 in turns (ROUNDS, default 3, while time is left; the order reversed every second
# round). Each run times ours and cuBLAS in turns. Summary LAST.
# Locally (no GPU): DRY=1 W=/tmp/s17_w X=/tmp/s17_x bash dev/gemm_sm90/run_s17_dwc.sh  (patch check + the
# summary on made-up bench logs)
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-540}
ROUNDS=${ROUNDS:-3}
DRY=${DRY:-0}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
at() { echo "$(($(date +%s) - T0)) s"; }
x=${X:-/tmp/x}
W=${W:-/tmp/w17}
BD=${BD:-/tmp/bn17}
patch=$PWD/dev/gemm_sm90/s17_dwc.patch
mkdir -p $x
: >$x/summary.txt

rm -rf $W && mkdir -p $W
tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C $W
if (cd $W && git apply --check $patch 2>/dev/null); then
    (cd $W && git apply $patch) && echo "s17_dwc.patch applied to $W" | tee -a $x/summary.txt
elif (cd $W && git apply -R --check $patch 2>/dev/null); then
    echo "tree already has s17_dwc.patch: built as is" | tee -a $x/summary.txt
else
    echo "s17_dwc.patch neither applies nor reverts: stop" | tee -a $x/summary.txt
    exit 1
fi

# bench_s<V>_<round>.txt -> per dW shape and variant: TF/s and ratio to cuBLAS per round, medians, new/old;
# the other GPT-2 shapes as a control (median TF/s of s1 and s2 over s0: ~1.00 expected, their plans unchanged).
summarize() {
    ls $x/bench_s*_*.txt >/dev/null 2>&1 || return
    (cd $x && awk '
        function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
                                      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        FNR == 1 { split(FILENAME, p, "_"); v = substr(p[2], 2); sub(/\.txt$/, "", p[3]); rd = p[3] + 0; if (rd > nr) nr = rd }
        { flag = ($0 ~ / FLAG/); sub(/ FLAG.*/, "") }
        $2 == "gpt2" && NF >= 15 && $(NF - 3) + 0 > 0 {
            k = $3 " " $5 "x" $6 "x" $7 " " $9
            if (!(k in seen)) { seen[k] = 1; order[++n] = k }
            path = $10; for (i = 11; i <= NF - 5; i++) path = path " " $i
            tf[k, v, rd] = $(NF - 3); ref[k, v, rd] = $(NF - 2); rat[k, v, rd] = $(NF - 1); dif[k, v, rd] = $NF
            plan[k, v] = path; if (flag) flagged[k, v] = 1 }
        END {
            print "== camel bench gemm --dtype bf16 --set gpt2 --reps 30, CML_SM90_DW_STREAM = 0 (today) / 1 (stream c1) / 2 (stream c2) in turns"
            print "   dW shapes: per variant TF/s (ratio to cuBLAS) per round; median TF/s, median ratio; new/old = median TF/s over s0'"'"'s"
            for (i = 1; i <= n; i++) {
                k = order[i]; if (k !~ /gpt2_dw/ || k !~ /(3072x768x8192|768x3072x8192) TN/) continue
                dw[k] = 1; split("", mt)
                for (v = 0; v <= 2; v++) {
                    line = sprintf("%-34s s%d", k, v); c = 0; dm = 0
                    for (rd = 1; rd <= nr; rd++) if ((k, v, rd) in tf) {
                        line = line sprintf("  r%d %6.1f (%.3f)", rd, tf[k, v, rd], rat[k, v, rd]); c++
                        t[c] = tf[k, v, rd]; r[c] = rat[k, v, rd]; if (dif[k, v, rd] + 0 > dm) dm = dif[k, v, rd] + 0 }
                    if (!c) { print line "  (no data)"; continue }
                    mt[v] = med(t, c); mr[v] = med(r, c)
                    line = line sprintf("  | median %6.1f TF/s, ratio %.3f", mt[v], mr[v])
                    if (v > 0 && mt[0] > 0) line = line sprintf(", new/old %.3f", mt[v] / mt[0])
                    line = line sprintf(", rel.diff max %.1e, plan \"%s\"%s", dm, plan[k, v], ((k, v) in flagged) ? "  FLAGGED" : "")
                    print line; med_t[k, v] = mt[v]
                }
            }
            for (v = 1; v <= 2; v++) {
                lo = 9; hi = 0; cn = 0; worst = ""
                for (i = 1; i <= n; i++) {
                    k = order[i]; if (k in dw) continue; c = 0
                    for (rd = 1; rd <= nr; rd++) if ((k, v, rd) in tf && (k, 0, rd) in tf) { c++; q[c] = tf[k, v, rd] / tf[k, 0, rd] }
                    if (!c) continue
                    m = med(q, c); cn++; if (m < lo) { lo = m; worst = k } if (m > hi) hi = m
                    if (plan[k, v] != plan[k, 0]) bad = bad sprintf("  PLAN CHANGED for %s: s0 \"%s\", s%d \"%s\"\n", k, plan[k, 0], v, plan[k, v])
                }
                if (cn) printf "control (the %d other GPT-2 shapes, plans unchanged): median per-round TF/s s%d/s0 %.3f .. %.3f (lowest: %s); expect ~1.00\n", cn, v, lo, hi, worst
            }
            if (bad != "") printf "%s", bad
            for (i = 1; i <= n; i++) {
                k = order[i]; if (!(k in dw)) continue
                if ((k, 2) in med_t && (k, 0) in med_t && med_t[k, 0] > 0)
                    printf "verdict %s: stream c2 / today %.3f (predicted ~1.2; refuted if < 1.05), stream c2 / stream c1 %.3f\n", k,
                        med_t[k, 2] / med_t[k, 0], ((k, 1) in med_t && med_t[k, 1] > 0) ? med_t[k, 2] / med_t[k, 1] : 0
            }
        }' bench_s*_*.txt) >>$x/summary.txt
}

if [ "$DRY" = 1 ]; then # the summary on made-up bench output (no build, no GPU)
    for rd in 1 2 3; do
        for v in 0 1 2; do
            awk -v rd=$rd -v v=$v 'BEGIN { srand(rd * 7 + v)
                print "camel bench gemm on NVIDIA H100 80GB HBM3 (132 SMs): 5 cases, median of 30 timed calls per side, L2 flushed before each"
                printf "%-5s %-8s %-15s %-10s %6s %6s %6s %5s %-3s %-16s %9s %9s %9s %7s %9s\n", "dtype", "set", "op", "name", "M", "N", "K", "batch", "ops", "path", "ours ms", "ours TF/s", "ref TF/s", "ratio", "rel diff"
                split("gpt2_fwd 8192 768 768 NT|gpt2_dw 3072 768 8192 TN|gpt2_dw 768 3072 8192 TN|gpt2_dw 768 768 8192 TN|gpt2_dw 2304 768 8192 TN", c, "|")
                for (i = 1; i <= 5; i++) { split(c[i], s, " "); dws = (i == 2 || i == 3)
                    ours = 610 * (dws && v == 1 ? 0.87 : dws && v == 2 ? 1.2 : 1) * (0.99 + rand() / 50); refv = 695
                    path = dws && v ? sprintf("sm90 128x192x1 c%d stream tuned", v) : "sm90 128x192x1 c1 tuned"
                    printf "%-5s %-8s %-15s %-10.10s %6d %6d %6d %5d %s  %-16s %9.3f %9.1f %9.1f %7.3f %9.2e%s\n", "bf16", "gpt2", s[1], "mlp_fc", s[2], s[3], s[4], 1, s[5], path, 0.064, ours, refv, ours / refv, (dws && v ? 1.5e-4 : 0), (i == 3 && v == 2 && rd == 2) ? " FLAG: outputs differ" : ""
                    if (i == 2) print "bench gemm [###.....]  40% 4 cases/s ETA 00:01" } }' >$x/bench_s${v}_$rd.txt
        done
    done
    summarize
    cat $x/summary.txt
    exit 0
fi

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >$x/gpu.txt 2>&1
(cmake -S $W -B $BD -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    >/dev/null && timeout 330 cmake --build $BD -j16 --target camel test_gpu_gemm camel_shared) >$x/build.log 2>&1
rb=$?
echo "build rc=$rb at $(at)" | tee -a $x/summary.txt
if [ $rb -ne 0 ]; then
    tail -30 $x/build.log
    cat $x/summary.txt
    exit 1
fi
echo "ptxas (--warn-on-spills): $(grep -cE 'C75[0-9][0-9]' $x/build.log) C75xx lines ($(grep -E 'C75[0-9][0-9]' $x/build.log | grep -oE 'C75[0-9][0-9]' | sort | uniq -c | tr '\n' ' ')), $(grep 'spilled' $x/build.log | grep -c gemm_sm90) spill warnings in gemm_sm90 kernels ($(grep 'spilled' $x/build.log | grep -c 'gemm_sm90_kernelI.*ELi0ELi1EE') in the stream kernels)" | tee -a $x/summary.txt
grep -E 'C75[0-9][0-9]' $x/build.log | grep -v C7519 | sort | uniq -c | head -5 | sed 's/^/  not C7519: /' >>$x/summary.txt

t=$(($(left) - 200)); [ $t -gt 200 ] && t=200; [ $t -lt 60 ] && t=60
(cd $BD && timeout $t tests/test_gpu_gemm) >$x/test.log 2>&1
rt=$?
echo "test_gpu_gemm rc=$rt at $(at): $(grep -E 'passed|failed|FAIL' $x/test.log | tail -3 | tr '\n' ' ')" | tee -a $x/summary.txt
grep -E 'forced stream cases|CML_SM90_DW_STREAM|bitwise equal to mode' $x/test.log | sed 's/^/  /' >>$x/summary.txt

bench() { # variant
    local f=$x/bench_s$1_$bround.txt
    CML_SM90_DW_STREAM=$1 timeout 60 $BD/apps/camel/camel bench gemm --dtype bf16 --set gpt2 --reps 30 --commit s17dwc_s$1 >$f 2>&1
    echo "bench s$1 round $bround rc=$? at $(at)" >>$x/summary.txt
}
bround=1
while [ "$(left)" -gt 75 ] && [ $bround -le $ROUNDS ]; do
    if [ $((bround % 2)) -eq 1 ]; then order="0 1 2"; else order="2 1 0"; fi
    for v in $order; do
        [ "$(left)" -gt 25 ] && bench $v
    done
    bround=$((bround + 1))
done
summarize
echo "GPU: $(tail -1 $x/gpu.txt); done at $(at)" >>$x/summary.txt
cat $x/summary.txt
