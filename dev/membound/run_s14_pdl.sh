#!/usr/bin/env bash
# Session 13 (helper h13f), one device call (written for session 14): does programmatic dependent launch
# (PDL), with or without an L2 prefetch before griddepcontrol.wait, let one stream-ordered call reach 90%
# of the 1 GiB copy at 16-64 MiB? README "Session 13 (helper h13f)". Self-contained: needs only nvcc and
# (optionally) PyTorch; touches nothing in the library. Run from the tree root:
#   bash dev/membound/run_s14_pdl.sh; tar czf $OUT/logs.tgz -C /tmp/x .
# 1. nvcc -O3 -arch=sm_90a dev/membound/pdl_harness.cu (ptxas -v: registers, spills);
# 2. the harness at 2 blocks of 512 per SM (a PDL successor's blocks fit beside a running grid), 2 rounds;
#    then at 1 and 4 blocks per SM (4: no room beside a running grid), 1 round each;
# 3. PyTorch's copy_ and sum at the same sizes (dev/membound/s14_torch_copy.py), if torch imports;
# each step in its own time box (whole run ~2-3 min expected, < 300 s by the boxes).
# Logs in /tmp/x; printed LAST: the 2-blocks-per-SM fits and summary.
# DRY=1: builds here if nvcc exists, runs nothing, prints the summary extraction on the logs present.
set -u
root=$(pwd)
X=${X:-/tmp/x}
H=$root/dev/membound/pdl_harness.cu
T=$root/dev/membound/s14_torch_copy.py
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ "${DRY:-0}" = 1 ]; then mkdir -p $X && rm -f $X/stages.txt; else rm -rf $X && mkdir -p $X; fi
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a $X/stages.txt; }

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader >$X/gpu.txt 2>&1
stamp "build ($NVCC)"
"$NVCC" -O3 -arch=sm_90a -Xptxas -v -Xptxas=--warn-on-spills -o $X/pdl_harness "$H" >$X/build.txt 2>&1 ||
    { cat $X/build.txt; stamp "BUILD FAILED"; exit 1; }
grep -E "registers|spill|C75" $X/build.txt | sort | uniq -c >$X/ptxas.txt

if [ "${DRY:-0}" != 1 ]; then
    stamp "harness bps 2, 2 rounds"
    timeout 150 $X/pdl_harness --bps 2 --rounds 2 >$X/bps2.txt 2>&1; echo "rc $?" >>$X/bps2.txt
    stamp "harness bps 1"
    timeout 60 $X/pdl_harness --bps 1 --rounds 1 >$X/bps1.txt 2>&1; echo "rc $?" >>$X/bps1.txt
    stamp "harness bps 4"
    timeout 60 $X/pdl_harness --bps 4 --rounds 1 >$X/bps4.txt 2>&1; echo "rc $?" >>$X/bps4.txt
    stamp "torch"
    timeout 60 python3 "$T" >$X/torch.txt 2>&1; echo "rc $?" >>$X/torch.txt
    stamp "done"
fi

# ---- summary (printed last) ----
section() { sed -n '/^=== SUMMARY/,$p' "$1" 2>/dev/null; }
echo
echo "===== run_s14_pdl summary ($(cat $X/gpu.txt 2>/dev/null)) ====="
cat $X/stages.txt
echo "--- ptxas (count, line) ---"
cut -c1-150 $X/ptxas.txt
for b in 1 4; do
    echo "--- bps $b (1 round): $(grep -E '^kernels:' $X/bps$b.txt 2>/dev/null | cut -c1-200) ---"
    section $X/bps$b.txt | grep -vE '^ +(96|128|256|1024|2048) '
    grep -E "CHECK FAILED" $X/bps$b.txt 2>/dev/null | head -5
done
echo "--- torch (steady) ---"
grep -E "^TORCH|Error|error|^rc " $X/torch.txt 2>/dev/null | head -30
echo "--- bps 2 (2 rounds, best of rounds): $(grep -E '^device' $X/bps2.txt 2>/dev/null) ---"
grep -E "^kernels:|^reference:" $X/bps2.txt 2>/dev/null
echo "cold rows (op mode MiB variant us GB/s %1Gcopy(cold) %memcpy(cold)); steady ones in bps2.txt:"
grep -E "^(copy|sum) +cold +(16|32|64) " $X/bps2.txt 2>/dev/null | awk '{print $1, $3, $5, $6, $7, $8, $9}' | column -t
grep -E "^FIT .* steady " $X/bps2.txt 2>/dev/null | cut -c1-170
grep -E "CHECK FAILED" $X/bps2.txt 2>/dev/null | head -5
section $X/bps2.txt
