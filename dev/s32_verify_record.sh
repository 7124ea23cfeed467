#!/usr/bin/env bash
# Session 32, end: dev/s21_verify.sh (the whole tree for sm_90a with -Werror, ctest -L gpu), then the membound record
# of dev/s21_record.sh with the binary that build made (into $OUT: membound_h100.json, membound_table.md).
#   run(command="COMMIT=<short hash> bash dev/s32_verify_record.sh", timeout_s=600)
set -u
bash "$(dirname "$0")/s21_verify.sh"
BIN=build-verify/apps/camel/camel bash "$(dirname "$0")/s21_record.sh"
