/* CUDA convolution backward-filter: dw (and dbias) from dy and x, deterministic.
 *
 * The batch is cut into J chunks of nbc consecutive images (the last may be
 * shorter); J and nbc depend on the shape alone. Each chunk's gradient is one
 * GEMM per group whose reduction runs over all the chunk's positions:
 *   NCHW: part_j,g (Kg, R S Cg) = dy_j,g (Kg, L) col_j,g^T, where dy_j and col_j are the chunk's images
 *         side by side (L = len_j P Q columns; conv_internal.cuh's chunk layout, dy re-laid out when
 *         nbc > 1 or it needs converting);
 *   NHWC: part_j,g = dy_j,g^T (Kg, L) col_j,g (L, R S Cg): the chunk's rows are already consecutive.
 * The chunks of a pass are one batched GEMM (the short last chunk its own), and
 * the J partial gradients are added in chunk order by one more kernel (f32 with
 * one chunk: the GEMM writes dw itself). No atomics; cml_gemm is deterministic.
 * dbias is a per-channel sum of dy (common/channel_sums.cuh). */
#include "kernels/cuda/conv/conv_internal.cuh"

#define MAX_CHUNKS 256 /* partial gradients: enough blocks for the GEMMs without much extra summing */

typedef struct filter_plan {
    long long nbc, J, last; /* images per chunk, chunks, images in the last chunk */
    bool direct;            /* x is its own column matrix (f32 1x1; NCHW only with one image per chunk) */
    bool relayout_dy;       /* dy goes through f32 scratch (chunk layout in NCHW, conversion in NHWC) */
    bool partials;          /* chunks write partial gradients (else the GEMM writes dw) */
} filter_plan;

static filter_plan make_plan(const conv_geom *g) {
    filter_plan f;
    long long jmax = CONV_PASS_FLOATS / g->nw;
    if (jmax > MAX_CHUNKS) jmax = MAX_CHUNKS;
    if (jmax > g->N) jmax = g->N;
    if (jmax < 1) jmax = 1;
    f.nbc = (g->N + jmax - 1) / jmax;
    f.J = (g->N + f.nbc - 1) / f.nbc;
    f.last = g->N - (f.J - 1) * f.nbc;
    f.direct = g->direct && (g->cl || f.nbc == 1);
    f.relayout_dy = g->dt != CML_F32 || (!g->cl && f.nbc > 1);
    f.partials = f.J > 1 || g->dt != CML_F32;
    return f;
}

/* The GEMMs of `batch` chunks of len images each, the first being chunk jrel of the pass (whose
 * column matrices start at cm and dy at dys, both in the pass's layout), into dst chunk by chunk. */
static cml_status chunk_gemms(cml_ctx *ctx, conv_ws *ws, const conv_geom *g, const filter_plan *f, long long jrel,
                              long long batch, long long len, const float *cm, const float *dys, float *dst) {
    const long long L = len * g->PQ, nbc = f->nbc;
    for (long long gi = 0; gi < g->G; gi++) {
        float *d = conv_at(dst, jrel * g->nw + gi * g->Kg * g->RSCg);
        if (g->cl) {
            const long long row0 = jrel * nbc * g->PQ; /* the chunk's first row */
            CML_TRY(conv_gemm(ctx, ws, CML_OP_T, CML_OP_N, g->Kg, g->RSCg, L, batch,
                              conv_at(dys, row0 * g->K + gi * g->Kg), g->K, nbc * g->PQ * g->K,
                              conv_at(cm, row0 * g->CRS + gi * g->RSCg), g->CRS, nbc * g->PQ * g->CRS, d, g->RSCg,
                              g->nw));
        } else {
            const float *dy_j = conv_at(dys, jrel * nbc * g->K * g->PQ), *col_j = conv_at(cm, jrel * nbc * g->CRS * g->PQ);
            CML_TRY(conv_gemm(ctx, ws, CML_OP_N, CML_OP_T, g->Kg, g->RSCg, L, batch, conv_at(dy_j, gi * g->Kg * L), L,
                              nbc * g->K * g->PQ, conv_at(col_j, gi * g->RSCg * L), L, nbc * g->CRS * g->PQ, d,
                              g->RSCg, g->nw));
        }
    }
    return CML_OK;
}

static cml_status bwd_filter_plan(cml_ctx *ctx, conv_ws *ws, const conv_geom *g, const filter_plan *f, void *dw,
                                  void *dbias, const void *dy, const void *x) {
    const long long per_chunk = f->nbc * ((f->direct ? 0 : g->CRS * g->PQ) + (f->relayout_dy ? g->K * g->PQ : 0));
    const long long cpp = conv_pass_images(per_chunk, f->J); /* chunks per pass */
    float *part = f->partials ? conv_ws_take(ws, f->J * g->nw) : (float *)dw;
    float *col = f->direct ? NULL : conv_ws_take(ws, cpp * f->nbc * g->CRS * g->PQ);
    float *dyb = f->relayout_dy ? conv_ws_take(ws, cpp * f->nbc * g->K * g->PQ) : NULL;
    for (long long j0 = 0; j0 < f->J; j0 += cpp) {
        const long long j1 = f->J - j0 < cpp ? f->J : j0 + cpp;
        const long long n0 = j0 * f->nbc, m = (j1 == f->J ? g->N : j1 * f->nbc) - n0;
        const void *x_p = conv_at_dt(x, n0 * g->C * g->HW, g->dt), *dy_p = conv_at_dt(dy, n0 * g->K * g->PQ, g->dt);
        const float *cm = f->direct ? (const float *)x_p : col, *dys = f->relayout_dy ? dyb : (const float *)dy_p;
        if (!f->direct) CML_TRY(cml__conv_im2col(ctx, ws, g, col, x_p, m, f->nbc));
        if (f->relayout_dy) CML_TRY(cml__conv_chunk_rows(ctx, ws, g, dyb, dy_p, m, g->K, g->cl ? 1 : f->nbc));
        const bool short_last = j1 == f->J && f->last < f->nbc;
        const long long full = j1 - j0 - (short_last ? 1 : 0);
        float *dst = conv_at(part, j0 * g->nw);
        if (full > 0) CML_TRY(chunk_gemms(ctx, ws, g, f, 0, full, f->nbc, cm, dys, dst));
        if (short_last) CML_TRY(chunk_gemms(ctx, ws, g, f, full, 1, f->last, cm, dys, dst));
    }
    if (f->partials) CML_TRY(cml__conv_sum_partials(ctx, ws, g, dw, part, g->nw, f->J));
    if (dbias) CML_TRY(cml__conv_bias_grad(ctx, ws, g, dbias, dy));
    return CML_OK;
}

extern "C" cml_status cml__conv2d_bwd_filter_cuda(cml_ctx *ctx, const cml_conv2d_desc *desc, int64_t P, int64_t Q,
                                                  void *dw, void *dbias, const void *dy, const void *x) {
    const conv_geom g = conv_make_geom("cml_conv2d_bwd_filter", desc, P, Q);
    CML_TRY(conv_check(&g));
    CML_TRY(cml__cuda_activate(ctx));
    if (g.N == 0) { /* sums over no images */
        CML_CUDA_TRY(g.fn, cudaMemsetAsync(dw, 0, (size_t)g.nw * cml_dtype_size(g.dt), cml__stream(ctx)));
        if (dbias) CML_CUDA_TRY(g.fn, cudaMemsetAsync(dbias, 0, (size_t)g.K * cml_dtype_size(g.dt), cml__stream(ctx)));
        return CML_OK;
    }
    const filter_plan f = make_plan(&g);
    const long long widest = g.CRS > g.K ? g.CRS : g.K;
    if (f.nbc * g.PQ * widest > CONV_MAX_PASS_ELEMS)
        return cml__error(CML_ERR_UNSUPPORTED,
                          "%s: a chunk of %lld images has %lld x %lld column elements; on CUDA it must be < 2^31", g.fn,
                          f.nbc, f.nbc * g.PQ, widest);
    conv_ws ws = {false, NULL, 0, 0};
    CML_TRY(bwd_filter_plan(ctx, &ws, &g, &f, dw, dbias, dy, x));
    CML_TRY(conv_ws_begin(ctx, &ws));
    return bwd_filter_plan(ctx, &ws, &g, &f, dw, dbias, dy, x);
}
