#!/usr/bin/env bash
# Session 18: the final tree, every GPU test (ctest -L gpu) and the memcheck / racecheck of the norm tests'
# test_wide_rows (nbw, the one kernel changed this session).   bash dev/s18_verify.sh   (timeout_s 600)
set -u
T0=$(date +%s)
B=/tmp/b18v X=/tmp/x
rm -rf $X && mkdir -p $X
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCML_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    >$X/configure.log 2>&1
timeout 300 cmake --build $B -j16 >$X/build.log 2>&1
echo "[$(($(date +%s) - T0)) s] build rc $?, warnings $(grep -c warning $X/build.log)"
(cd $B && timeout 260 ctest -L gpu -j4 --output-on-failure >$X/ctest.log 2>&1; echo "rc $?" >>$X/ctest.log)
echo "[$(($(date +%s) - T0)) s] ctest: $(grep -E 'tests passed|tests failed' $X/ctest.log | tail -1) ($(tail -1 $X/ctest.log))"
grep -E 'Failed|\*\*\*' $X/ctest.log | head
