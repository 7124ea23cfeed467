#!/usr/bin/env bash
# Session 20 (local, no GPU): builds the dev variants of camel that run_s20_*.sh time on the H100, from one
# sm_90a-only build (build-s20r; 90a-real keeps the binaries small enough to carry), each variant being
# gemm_sm90.cu recompiled with one CML_SM90_DEV_* switch (gemm_sm90_kernel.cuh) and camel relinked; the
# stripped binaries xz-compressed into build-s20x/ (carry it: run(carry=["build-s20x"])). The switches are not in
# the library: apply them first (git apply dev/gemm_sm90/s20_dev_switches.patch, on 4bf5bfe) and revert after.
# run_s20_ab.sh (old / new / early), run_s20_mc.sh (new / mc1 / mc3) and run_s20_launch.sh (mc4, plain1) time them.
#   bash dev/gemm_sm90/s20_variants.sh [name=DEFINES ...]     (default: the session's five)
set -eu
cd "$(dirname "$0")/../.."
B=build-s20r X=${XDIR:-build-s20x}
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real >/dev/null
cmake --build $B -j2 --target camel test_gpu_gemm >/dev/null
mkdir -p $X
[ $# -gt 0 ] || set -- new= old=-DCML_SM90_DEV_FULL_WAIT=1 early=-DCML_SM90_DEV_EARLY=1 mc1=-DCML_SM90_DEV_MC=1 \
    mc3=-DCML_SM90_DEV_MC=3
# each variant: gemm_sm90.cu recompiled into a copy of libcamel, camel relinked (s24_build_variant.sh)
for v in "$@"; do XOUT=$X bash dev/gemm_sm90/s24_build_variant.sh "${v%%=*}" "${v#*=}"; done
