#!/usr/bin/env bash
# Session 24 (local): camel-base / -tab1 / -tab2 for run_s24_table.sh, gemm_sm90.cu recompiled with each table copy
# (/tmp/tuned_{head,tab1,tab2}.inc: s24_results/table_candidates.txt) into build-s24x/.
set -e
cd /work/main
B=build-s20r X=build-s24x
obj=src/CMakeFiles/camel_obj.dir/kernels/cuda/gemm/gemm_sm90.cu.o
rm -f $X/*.xz
(cd $B && ninja src/libcamel.a >/dev/null 2>&1)   # the rest of the library at HEAD (gemm_sm90.cu with the table as is)
link_cmd=$(cd $B && ninja -t commands apps/camel/camel | tail -1)
cc_cmd=$(cd $B && ninja -t commands $obj | tail -1)
for v in base tab1 tab2; do
  cp /tmp/tuned_$([ $v = base ] && echo head || echo $v).inc src/kernels/cuda/gemm/gemm_sm90_tuned.inc
  w=$B/v_$v; rm -rf $w && mkdir -p $w/obj
  c=${cc_cmd//-o $obj/-o v_$v/obj/gemm_sm90.cu.o}
  (cd $B && eval "$c" 2>&1 | grep -v "ptxas warning" || true)
  cp $B/src/libcamel.a $w/libcamel.a; (cd $w/obj && ar r ../libcamel.a gemm_sm90.cu.o)
  (cd $B && eval "${link_cmd//src\/libcamel.a/v_$v/libcamel.a}" && mv apps/camel/camel v_$v/camel)
  strip $w/camel; xz -6 -T2 -c $w/camel > $X/camel-$v.xz; echo "built $v"
done
cp /tmp/tuned_head.inc src/kernels/cuda/gemm/gemm_sm90_tuned.inc
