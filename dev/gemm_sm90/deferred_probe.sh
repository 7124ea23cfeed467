#!/usr/bin/env bash
# Session 7: the deferred-epilogue variants (session7_deferred_epilogue.patch, CML_SM90_DEV_DEFER)
# in the harness (op NT, cluster 1, group_m 16, TMA store) against the unpatched kernel ("old").
# Needs build-ab/main.tgz (git archive of the base commit) and build-ab/epi.tgz (the same with the
# patch applied), carried to the device.
set -u
L=/tmp/p7; mkdir -p $L /tmp/src-main /tmp/src-epi; t0=$(date +%s)
tar xzf build-ab/main.tgz -C /tmp/src-main; tar xzf build-ab/epi.tgz -C /tmp/src-epi
cc="nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DHARNESS_ONLY_NT"
(cd /tmp/src-main && $cc -Iinclude -Isrc dev/gemm_sm90/harness.cu -lcublas -lcuda -o $L/h_old > $L/nvcc_old.log 2>&1) &
for v in 0 1 2 5; do (cd /tmp/src-epi && $cc -Iinclude -Isrc -DCML_SM90_DEV_DEFER=$v dev/gemm_sm90/harness.cu -lcublas -lcuda -o $L/h_d$v > $L/nvcc_d$v.log 2>&1) & done
(cd /tmp/src-epi && $cc -Iinclude -Isrc -DCML_SM90_DEV_EPI=2 dev/gemm_sm90/harness.cu -lcublas -lcuda -o $L/h_stage > $L/nvcc_stage.log 2>&1) &
(cd /tmp/src-epi && $cc -Iinclude -Isrc -DCML_SM90_DEV_EPI=6 dev/gemm_sm90/harness.cu -lcublas -lcuda -o $L/h_e6 > $L/nvcc_e6.log 2>&1) &
wait; echo "builds $(( $(date +%s)-t0 ))s"; ls $L/h_* | wc -l
for r in 1 2; do
for case in 8192,768,768,192 8192,2304,768,192 8192,3072,768,192 8192,768,3072,192 4096,4096,4096,256; do
  set -- ${case//,/ }
  for v in old d0 d1 d2 d5 stage e6; do
    echo -n "$v  "; timeout 60 $L/h_$v $1 $2 $3 N T 30 $4 16 1 tma | cut -c1-150
  done
done; done
echo "total $(( $(date +%s)-t0 ))s"
