#!/usr/bin/env bash
# Session 12's first device call, prepared in session 11: the two probes that session 11 built without device
# time, one after the other in ONE call (each is measured in its own A/B design; neither changes the library):
#  1. dev/attention_sm90/run_s12a.sh -- the pair-K D = 256 backward (helper h11d; s12a_pairk.patch applied to the
#     device's copy) against the library kernel in turns; refuted if pair / lib > 0.99 at causal 8k;
#  2. dev/gemm_sm90/wide_cluster_probe.sh -- 1-D clusters of 1 / 2 / 4 / 8 on the GPT-2 weight gradients
#     (helper h11e's step A1); A2 (160-wide tiles with 4-8-way multicast) is worth building only if 4 / 8 stay
#     within ~3% of cluster 1.
# Logs: /tmp/x (attention), /tmp/wc (GEMM); both summaries printed last.
#   bash dev/s12_first.sh; tar czf $OUT/logs.tgz -C /tmp x wc                   (run: timeout_s 600)
set -u
t0=$(date +%s)
DEADLINE=330 bash dev/attention_sm90/run_s12a.sh > /tmp/s12a_summary.txt 2>&1
echo "pair-K probe rc=$? at $(( $(date +%s) - t0 )) s" >> /tmp/s12a_summary.txt
left=$(( 580 - ($(date +%s) - t0) ))
if [ $left -gt 100 ]; then
    timeout $left bash dev/gemm_sm90/wide_cluster_probe.sh > /tmp/wc_summary.txt 2>&1
    echo "wide-cluster probe rc=$? at $(( $(date +%s) - t0 )) s" >> /tmp/wc_summary.txt
else
    echo "wide-cluster probe skipped: ${left} s left" > /tmp/wc_summary.txt
fi
mkdir -p /tmp/x /tmp/wc && cp /tmp/s12a_summary.txt /tmp/x/ && cp /tmp/wc_summary.txt /tmp/wc/
echo "== pair-K D = 256 backward"; tail -40 /tmp/s12a_summary.txt
echo "== wide clusters (GEMM dW)"; tail -30 /tmp/wc_summary.txt
