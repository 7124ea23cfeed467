# Sourced by the session-20 and -21 run scripts (dev/gemm_sm90/run_s20_*.sh, dev/membound/run_s2[01]_*.sh): their
# binaries were built on the development machine for 90a-real, stripped and xz-compressed into build-s20x/ (carried
# to the GPU machine with run(carry=["build-s20x"]); session 21: XDIR=build-s21x); unpack puts them in /tmp/bin. Logs
# and stage times go to $X.
X=${X:-/tmp/x}
XDIR=${XDIR:-build-s20x} # the carried folder of binaries
T0=$(date +%s)
rm -rf "$X" && mkdir -p "$X" /tmp/bin
stamp() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a "$X/stages.txt"; }
# unpack [NAME ...]: $XDIR/NAME.xz -> /tmp/bin/NAME (every $XDIR/*.xz when no name is given)
unpack() {
    local names=("$@") n
    [ ${#names[@]} -gt 0 ] || names=($(cd $XDIR && ls *.xz | sed 's/\.xz$//'))
    for n in "${names[@]}"; do
        python3 -c "import lzma, sys; open(sys.argv[2], 'wb').write(lzma.open(sys.argv[1]).read())" \
            "$XDIR/$n.xz" "/tmp/bin/$n" && chmod +x "/tmp/bin/$n"
    done
    stamp "unpacked ${names[*]}"
}
# in_turns ROUNDS "A B ..." ARGS...: /tmp/bin/camel-A ARGS, camel-B ARGS, ... in turns (the order reversed every
# other round, so that drifting clocks touch every side alike); each run's JSON in $X/bench_<variant>_<round>.json
in_turns() {
    local rounds=$1 vs=$2 r v order
    shift 2
    for r in $(seq 1 "$rounds"); do
        order=$vs
        [ $((r % 2)) = 0 ] && order=$(echo $vs | tr ' ' '\n' | tac | tr '\n' ' ')
        for v in $order; do
            timeout 150 /tmp/bin/camel-$v "$@" --json $X/bench_${v}_$r.json --commit $v >$X/bench_${v}_$r.txt 2>&1
            stamp "$1 $2 $v round $r rc $?"
        done
    done
}
# run_tests NAME ...: /tmp/bin/test_gpu_NAME whole, in parallel; logs $X/test_NAME.log, "rc N" last
run_tests() {
    local t
    for t in "$@"; do
        (timeout 250 /tmp/bin/test_gpu_$t >$X/test_$t.log 2>&1; echo "rc $?" >>$X/test_$t.log) &
    done
    wait
    stamp "tests done: $*"
}
# sanitize BINARY [TEST ...]: compute-sanitizer memcheck, racecheck and synccheck (TOOLS: those named; in parallel) of
# each named test of the program (CML_TEST_ONLY), or of the whole program; logs $X/san_<tool>_$TAG<test or
# program>.log, "rc N" last
sanitize() {
    local bin=$1 tool t
    shift
    for tool in ${TOOLS:-memcheck racecheck synccheck}; do
        (for t in "${@:-$(basename $bin)}"; do
            CML_TEST_ONLY=$([ $# -gt 0 ] && echo $t) CML_TEST_SANITIZER=1 timeout 280 compute-sanitizer --tool $tool \
                --error-exitcode 99 --report-api-errors no $bin >$X/san_${tool}_${TAG:-}$t.log 2>&1
            echo "rc $?" >>$X/san_${tool}_${TAG:-}$t.log
        done) &
    done
    wait
}
# tests_summary: one stage line with every $X/test*.log and $X/san_*.log's exit status, then their failures
tests_summary() {
    local f
    for f in $X/san_*.log; do [ $(stat -c %s $f) -gt 100000 ] && { head -c 50000 $f >$f.cut; mv $f.cut $f; }; done
    stamp "tests: $(for f in $X/test*.log $X/san_*.log; do echo -n "$(basename $f .log)=$(tail -1 $f | cut -d' ' -f2) "; done)"
    grep -h "FAIL\|failed\|ERROR SUMMARY\|Hazard" $X/test*.log $X/san_*.log | sort | uniq -c | head -20 | tee -a $X/stages.txt
}
# tl_rounds ROUNDS "A B ...": the timeline builds /tmp/bin/camel-A, camel-B, ... (CML_SM90_DEV_TIMELINE) over the bf16
# squares 1024 / 2048 and the GPT-2 set, in turns, every launch's stamps in $X/<variant>_<square|gpt2>_<round>/
tl_rounds() {
    local r v s n
    for r in $(seq 1 "$1"); do
        for v in $2; do
            for s in "square --sizes 1024,2048" "gpt2"; do
                n=${s%% *}
                mkdir -p $X/${v}_${n}_$r
                CML_SM90_TL_SEQ=1 CML_SM90_TL_DIR=$X/${v}_${n}_$r timeout 100 /tmp/bin/camel-$v bench gemm --dtype bf16 \
                    --set $s --reps 3 >$X/tlbench_${v}_${n}_$r.txt 2>&1
            done
        done
        stamp "timelines round $r"
    done
}
# tl_report ROUNDS "A B ..." [SHAPE ...]: the start-up in parts and the tile table of the last (L2-flushed) launch of
# each shape ("square|gpt2 tl_MxNxK_OPS"), per round and variant, into $X/timelines.txt
tl_report() {
    local rounds=$1 vs=$2 p r v f
    shift 2
    [ $# -gt 0 ] || set -- "square tl_1024x1024x1024_NN" "square tl_2048x2048x2048_NN" "gpt2 tl_8192x768x768_NT" \
        "gpt2 tl_8192x768x3072_NN" "gpt2 tl_3072x768x8192_TN"
    for p in "$@"; do
        for r in $(seq 1 "$rounds"); do
            for v in $vs; do
                f=$(ls $X/${v}_${p%% *}_$r/${p##* }_*.txt | tail -1)
                echo "== $v round $r $(basename $f)"
                python3 dev/gemm_sm90/startup_parts.py $f
                python3 dev/gemm_sm90/timeline.py $f
            done
        done
    done >$X/timelines.txt 2>&1
}
