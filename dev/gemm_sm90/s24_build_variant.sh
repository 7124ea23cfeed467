#!/usr/bin/env bash
# Session 24 (local): build_variant NAME DEFINES: gemm_sm90.cu compiled with DEFINES into a copy of libcamel, camel relinked -> $XOUT/camel-NAME.xz (default build-s24x)
set -eu
cd "$(dirname "$0")/../.."
B=build-s20r X=${XOUT:-build-s24x}
obj=src/CMakeFiles/camel_obj.dir/kernels/cuda/gemm/gemm_sm90.cu.o
cc_cmd=$(cd $B && ninja -t commands $obj | tail -1)
link_cmd=$(cd $B && ninja -t commands apps/camel/camel | tail -1)
w=$B/v_$1
rm -rf $w && mkdir -p $w/obj
cc_cmd=${cc_cmd/ -c / $2 -c }
cc_cmd=${cc_cmd//-o $obj/-o v_$1/obj/gemm_sm90.cu.o}
(cd $B && eval "$cc_cmd" 2>&1 | grep -v "ptxas warning" || true)
cp $B/src/libcamel.a $w/libcamel.a
(cd $w/obj && ar r ../libcamel.a gemm_sm90.cu.o)
(cd $B && eval "${link_cmd//src\/libcamel.a/v_$1/libcamel.a}" && mv apps/camel/camel v_$1/camel)
strip $w/camel
xz -6 -T2 -c $w/camel >$X/camel-$1.xz
echo "$1 ($2): $(stat -c %s $X/camel-$1.xz) bytes"
