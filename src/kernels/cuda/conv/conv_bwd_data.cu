/* CUDA convolution backward-data: dx from dy and w by cml_gemm (f32) into
 * column gradients, then col2im as a gather (each input element sums its
 * column entries in the CPU's order; no atomics), per pass of images:
 *   NCHW: dcol_g (R S Cg, P Q) = w_g^T dy_g, one GEMM per group batched over the pass's images;
 *   NHWC: dcol_g (n P Q, R S Cg) = dy_g w_g, one GEMM per group over all the pass's rows.
 * A 1x1 stride-1 unpadded f32 convolution writes dx straight from the GEMM. */
#include "kernels/cuda/conv/conv_internal.cuh"

static cml_status bwd_data_plan(cml_ctx *ctx, conv_ws *ws, const conv_geom *g, void *dx, const void *dy,
                                const void *w) {
    const bool f32 = g->dt == CML_F32;
    const long long per_image = (g->direct ? 0 : g->CRS * g->PQ) + (f32 ? 0 : g->K * g->PQ);
    const long long nb = conv_pass_images(per_image, g->N);
    const float *w32 = f32 ? (const float *)w : conv_ws_take(ws, g->nw);
    float *dcol = g->direct ? NULL : conv_ws_take(ws, nb * g->CRS * g->PQ);
    float *dy32 = f32 ? NULL : conv_ws_take(ws, nb * g->K * g->PQ);
    if (!f32) CML_TRY(cml__conv_to_f32(ctx, ws, g, (float *)w32, w, g->nw));
    for (long long n0 = 0; n0 < g->N; n0 += nb) {
        const long long m = g->N - n0 < nb ? g->N - n0 : nb;
        const void *dy_n = conv_at_dt(dy, n0 * g->K * g->PQ, g->dt);
        void *dx_n = conv_at_dt(dx, n0 * g->C * g->HW, g->dt);
        if (!f32) CML_TRY(cml__conv_to_f32(ctx, ws, g, dy32, dy_n, m * g->K * g->PQ));
        const float *src = f32 ? (const float *)dy_n : dy32;
        float *dst = g->direct ? (float *)dx_n : dcol;
        for (long long gi = 0; gi < g->G; gi++) {
            const float *w_g = conv_at(w32, gi * g->Kg * g->RSCg);
            if (g->cl)
                CML_TRY(conv_gemm(ctx, ws, CML_OP_N, CML_OP_N, m * g->PQ, g->RSCg, g->Kg, 1, conv_at(src, gi * g->Kg),
                                  g->K, 0, w_g, g->RSCg, 0, conv_at(dst, gi * g->RSCg), g->CRS, 0));
            else
                CML_TRY(conv_gemm(ctx, ws, CML_OP_T, CML_OP_N, g->RSCg, g->PQ, g->Kg, m, w_g, g->RSCg, 0,
                                  conv_at(src, gi * g->Kg * g->PQ), g->PQ, g->K * g->PQ,
                                  conv_at(dst, gi * g->RSCg * g->PQ), g->PQ, g->CRS * g->PQ));
        }
        if (!g->direct) CML_TRY(cml__conv_col2im(ctx, ws, g, dx_n, dcol, m));
    }
    return CML_OK;
}

extern "C" cml_status cml__conv2d_bwd_data_cuda(cml_ctx *ctx, const cml_conv2d_desc *desc, int64_t P, int64_t Q,
                                                void *dx, const void *dy, const void *w) {
    const conv_geom g = conv_make_geom("cml_conv2d_bwd_data", desc, P, Q);
    CML_TRY(conv_check(&g));
    CML_TRY(cml__cuda_activate(ctx));
    conv_ws ws = {false, NULL, 0, 0};
    CML_TRY(bwd_data_plan(ctx, &ws, &g, dx, dy, w));
    CML_TRY(conv_ws_begin(ctx, &ws));
    return bwd_data_plan(ctx, &ws, &g, dx, dy, w);
}
