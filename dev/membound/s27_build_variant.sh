#!/usr/bin/env bash
# Session 27 (local): build_variant NAME DEFINES: the norm backward objects (layernorm_bwd.cu, rmsnorm_bwd.cu) compiled
# with DEFINES into a copy of build-s20r's libcamel, camel relinked -> $XOUT/camel-NAME.xz (dev/gemm_sm90/
# s24_build_variant.sh's procedure for other objects). Also relinks test_gpu_layernorm / test_gpu_rmsnorm (-> .xz).
set -eu
cd "$(dirname "$0")/../.."
B=build-s20r X=${XOUT:-build-s27x}
w=$B/v_$1
rm -rf $w && mkdir -p $w/obj
cp $B/src/libcamel.a $w/libcamel.a
for f in layernorm_bwd rmsnorm_bwd; do
    obj=src/CMakeFiles/camel_obj.dir/kernels/cuda/norm/$f.cu.o
    cc_cmd=$(cd $B && ninja -t commands $obj | tail -1)
    cc_cmd=${cc_cmd/ -c / $2 -c }
    cc_cmd=${cc_cmd//-o $obj/-o v_$1/obj/$f.cu.o}
    (cd $B && eval "$cc_cmd" 2>&1 | grep -v "ptxas warning" || true)
    (cd $w/obj && ar r ../libcamel.a $f.cu.o)
done
for t in apps/camel/camel tests/test_gpu_layernorm tests/test_gpu_rmsnorm; do
    link_cmd=$(cd $B && ninja -t commands $t | tail -1)
    n=$(basename $t)
    (cd $B && eval "${link_cmd//src\/libcamel.a/v_$1/libcamel.a}" && mv $t v_$1/$n)
    strip $w/$n
    [ $n = camel ] && xz -6 -T2 -c $w/$n >$X/camel-$1.xz || xz -6 -T2 -c $w/$n >$X/$n-$1.xz
done
echo "$1 ($2): $(stat -c %s $X/camel-$1.xz) bytes"
