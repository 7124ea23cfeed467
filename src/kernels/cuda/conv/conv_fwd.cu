/* CUDA convolution forward: y = conv(x, w) + bias by im2col + cml_gemm (f32),
 * per pass of images (conv_internal.cuh has the layouts and the scratch plan):
 *   NCHW: y_g (Kg, P Q) = w_g (Kg, R S Cg) col_g, one GEMM per group batched over the pass's images;
 *   NHWC: y_g (n P Q, Kg) = col_g (n P Q, R S Cg) w_g^T, one GEMM per group over all the pass's rows.
 * f32 results land in y directly (the bias added in place afterwards); f16/bf16
 * results go through f32 scratch and the epilogue converts them. */
#include "kernels/cuda/conv/conv_internal.cuh"

static cml_status fwd_plan(cml_ctx *ctx, conv_ws *ws, const conv_geom *g, void *y, const void *x, const void *w,
                           const void *bias) {
    const bool f32 = g->dt == CML_F32;
    const long long per_image = (g->direct ? 0 : g->CRS * g->PQ) + (f32 ? 0 : g->K * g->PQ);
    const long long nb = conv_pass_images(per_image, g->N);
    const float *w32 = f32 ? (const float *)w : conv_ws_take(ws, g->nw);
    float *col = g->direct ? NULL : conv_ws_take(ws, nb * g->CRS * g->PQ);
    float *acc = f32 ? NULL : conv_ws_take(ws, nb * g->K * g->PQ);
    if (!f32) CML_TRY(cml__conv_to_f32(ctx, ws, g, (float *)w32, w, g->nw));
    for (long long n0 = 0; n0 < g->N; n0 += nb) {
        const long long m = g->N - n0 < nb ? g->N - n0 : nb;
        const void *x_n = conv_at_dt(x, n0 * g->C * g->HW, g->dt);
        void *y_n = conv_at_dt(y, n0 * g->K * g->PQ, g->dt);
        float *out = f32 ? (float *)y_n : acc;
        const float *cm = g->direct ? (const float *)x_n : col;
        if (!g->direct) CML_TRY(cml__conv_im2col(ctx, ws, g, col, x_n, m, 1));
        for (long long gi = 0; gi < g->G; gi++) {
            const float *w_g = conv_at(w32, gi * g->Kg * g->RSCg);
            if (g->cl)
                CML_TRY(conv_gemm(ctx, ws, CML_OP_N, CML_OP_T, m * g->PQ, g->Kg, g->RSCg, 1, conv_at(cm, gi * g->RSCg),
                                  g->CRS, 0, w_g, g->RSCg, 0, conv_at(out, gi * g->Kg), g->K, 0));
            else
                CML_TRY(conv_gemm(ctx, ws, CML_OP_N, CML_OP_N, g->Kg, g->PQ, g->RSCg, m, w_g, g->RSCg, 0,
                                  conv_at(cm, gi * g->RSCg * g->PQ), g->PQ, g->CRS * g->PQ,
                                  conv_at(out, gi * g->Kg * g->PQ), g->PQ, g->K * g->PQ));
        }
        if (bias || !f32) CML_TRY(cml__conv_epilogue(ctx, ws, g, y_n, out, bias, m));
    }
    return CML_OK;
}

extern "C" cml_status cml__conv2d_fwd_cuda(cml_ctx *ctx, const cml_conv2d_desc *desc, int64_t P, int64_t Q, void *y,
                                           const void *x, const void *w, const void *bias) {
    const conv_geom g = conv_make_geom("cml_conv2d_fwd", desc, P, Q);
    CML_TRY(conv_check(&g));
    CML_TRY(cml__cuda_activate(ctx));
    conv_ws ws = {false, NULL, 0, 0};
    CML_TRY(fwd_plan(ctx, &ws, &g, y, x, w, bias));
    CML_TRY(conv_ws_begin(ctx, &ws));
    return fwd_plan(ctx, &ws, &g, y, x, w, bias);
}
