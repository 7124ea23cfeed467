/* Session 22: prints the staged norm backward's plans (norm_bwd_staged.cuh: nbs_geometry in the mode of the
 * environment, CML_NORM_BWD_STAGED) for the bench's long rows, and the clusters of 2..16 CTAs that fit at once.
 * Build (any machine with nvcc): nvcc -DCML_HAVE_CUDA=1 -Isrc -Iinclude -O2 -std=c++17 -arch=sm_90a
 * dev/membound/staged_plan_probe.cu -o staged_plan_probe -lcuda (no library: the header's host code only). */
#include <stdio.h>

#include "kernels/cuda/norm/norm_bwd_staged.cuh"

template <int DT, bool LN> static void show(const char *name, long long rows, long long C) {
    nbs_plan p;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    if (!nbs_geometry<DT, LN>(0, sms, rows, C, &p)) {
        printf("%-4s %-4s %6lld x %-7lld none\n", LN ? "ln" : "rms", name, rows, C);
        return;
    }
    printf("%-4s %-4s %6lld x %-7lld %s ch %5d splits %2d groups %3d (CTAs %3d) kw %d stages %d\n", LN ? "ln" : "rms",
           name, rows, C, p.rows ? "rows   " : "cluster", p.ch, p.splits, p.groups, p.splits * p.groups, p.kw, p.nst);
}

int main(void) {
    printf("clusters resident (bf16 LN kernel):");
    for (int sp = 2; sp <= 16; sp++) printf(" %d:%d", sp, nbs_clusters<CML_BF16, true>(0, sp));
    printf("\n");
    const long long shapes[][2] = {{1024, 32768}, {256, 262144}, {4096, 16384}, {300, 32768}, {37, 20000}};
    for (auto &s : shapes) {
        show<CML_BF16, true>("bf16", s[0], s[1]);
        show<CML_BF16, false>("bf16", s[0], s[1]);
        show<CML_F32, true>("f32", s[0], s[1]);
        show<CML_F32, false>("f32", s[0], s[1]);
    }
    return 0;
}
