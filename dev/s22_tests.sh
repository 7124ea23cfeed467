#!/usr/bin/env bash
# Session 22, end: the norm tests of the final tree (built here for 90a-real into build-s22x/) whole, and memcheck /
# racecheck of test_staged_rows (the tree after dev/s21_verify.sh's run on d1205a9 changed only tests' helpers and
# comments).   XDIR=build-s22x bash dev/s22_tests.sh   (carry build-s22x)
set -u
. "$(dirname "$0")/carried.sh"
unpack
run_tests layernorm rmsnorm
TOOLS="memcheck racecheck" TAG=ln_ sanitize /tmp/bin/test_gpu_layernorm test_staged_rows &
TOOLS="memcheck racecheck" TAG=rms_ sanitize /tmp/bin/test_gpu_rmsnorm test_staged_rows &
wait
tests_summary
