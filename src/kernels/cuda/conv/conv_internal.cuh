/* Internal to the CUDA convolution (conv_fwd.cu, conv_bwd_data.cu,
 * conv_bwd_filter.cu, conv_layout.cu): the geometry, the scratch plan and the
 * layout kernels' launchers.
 *
 * The convolution is im2col + cml_gemm with f32 descriptors, as on the CPU
 * (src/kernels/cpu/conv.c has the column layouts):
 *   NCHW: col (C R S, P Q) per image, rows in (c, r, s) order;
 *   NHWC: col (P Q, C R S) per image, each row in (g, r, s, cg) order.
 * Images go through in passes whose column buffers fit a fixed scratch budget.
 * f16/bf16 operands are converted to f32 on the way into the column buffers
 * (or by a conversion kernel), and results back on the way out.
 *
 * Scratch comes from the context's workspace, planned like the CPU's carve: the
 * whole computation runs twice, first measuring (kernels are not launched;
 * cml_gemm_workspace_size is asked for every GEMM), then for real. cml_gemm may
 * itself take workspace, always from its start, so our buffers begin after
 * the largest amount any of our GEMMs asks for. */
#ifndef CML_KERNELS_CUDA_CONV_CONV_INTERNAL_CUH
#define CML_KERNELS_CUDA_CONV_CONV_INTERNAL_CUH

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/cuda_kernels.h"

/* Column or partial-sum floats per pass (64 MiB); at least one image per pass whatever its size. */
#define CONV_PASS_FLOATS ((long long)1 << 24)
/* Above this many elements a single image's column matrix is refused (32-bit indexing inside a pass). */
#define CONV_MAX_PASS_ELEMS ((long long)INT32_MAX)

typedef struct conv_geom {
    const char *fn; /* the public function, for messages */
    cml_dtype dt;
    long long N, C, H, W, K, R, S, P, Q;
    long long sh, sw, ph, pw, dh, dw, G, Cg, Kg;
    long long HW, PQ, RSCg, CRS, nw; /* nw: elements of w */
    bool cl;
    bool direct; /* f32, 1x1, stride 1, no padding: the image is its own column matrix */
} conv_geom;

static inline conv_geom conv_make_geom(const char *fn, const cml_conv2d_desc *d, int64_t P, int64_t Q) {
    conv_geom g;
    g.fn = fn;
    g.dt = d->dtype;
    g.N = d->N, g.C = d->C, g.H = d->H, g.W = d->W, g.K = d->K, g.R = d->R, g.S = d->S, g.P = P, g.Q = Q;
    g.sh = d->stride_h, g.sw = d->stride_w, g.ph = d->pad_h, g.pw = d->pad_w, g.dh = d->dil_h, g.dw = d->dil_w;
    g.G = d->groups, g.Cg = d->C / d->groups, g.Kg = d->K / d->groups;
    g.HW = g.H * g.W, g.PQ = P * Q, g.RSCg = g.R * g.S * g.Cg, g.CRS = g.C * g.R * g.S, g.nw = g.K * g.RSCg;
    g.cl = d->channels_last;
    g.direct = g.dt == CML_F32 && g.R == 1 && g.S == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
    return g;
}

/* Dtypes and sizes the CUDA convolution handles (the public entry point validated the rest). */
static inline cml_status conv_check(const conv_geom *g) {
    CML_TRY(cml__cuda_check_float_dtype(g->fn, "dtype", g->dt));
    const long long img = g->CRS * g->PQ > g->K * g->PQ ? g->CRS * g->PQ : g->K * g->PQ;
    const long long xi = g->C * g->HW;
    if (img > CONV_MAX_PASS_ELEMS || xi > CONV_MAX_PASS_ELEMS || g->nw > CONV_MAX_PASS_ELEMS)
        return cml__error(CML_ERR_UNSUPPORTED,
                          "%s: one image's column matrix (C*R*S*P*Q=%lld), output (K*P*Q=%lld), input (C*H*W=%lld) "
                          "and w (%lld) must each have < 2^31 elements on CUDA",
                          g->fn, g->CRS * g->PQ, g->K * g->PQ, xi, g->nw);
    return CML_OK;
}

/* ---- scratch plan ---------------------------------------------------------------------------- */

typedef struct conv_ws {
    bool run;          /* false while measuring: nothing is launched, pointers are NULL */
    char *base;        /* run: the first byte after the GEMM's share of the workspace */
    size_t used;       /* bytes handed out after base */
    size_t gemm_bytes; /* the most workspace any planned cml_gemm call asks for */
} conv_ws;

/* n floats of scratch (256-byte aligned); NULL while measuring. */
static inline float *conv_ws_take(conv_ws *w, long long n) {
    float *p = w->run ? (float *)(w->base + w->used) : NULL;
    w->used += ((size_t)n * sizeof(float) + 255) & ~(size_t)255;
    return p;
}

/* Takes the workspace measured so far (the GEMM's share first) and starts the real run. */
static inline cml_status conv_ws_begin(cml_ctx *ctx, conv_ws *w) {
    const size_t reserve = (w->gemm_bytes + 255) & ~(size_t)255;
    void *p = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &p, reserve + (w->used ? w->used : 1)));
    w->base = (char *)p + reserve;
    w->used = 0;
    w->run = true;
    return CML_OK;
}

/* base + off, kept NULL while measuring (no arithmetic on null pointers). */
static inline float *conv_at(float *base, long long off) { return base ? base + off : NULL; }
static inline const float *conv_at(const float *base, long long off) { return base ? base + off : NULL; }
static inline const void *conv_at_dt(const void *base, long long off, cml_dtype dt) {
    return base ? (const char *)base + (size_t)off * cml_dtype_size(dt) : NULL;
}
static inline void *conv_at_dt(void *base, long long off, cml_dtype dt) {
    return base ? (char *)base + (size_t)off * cml_dtype_size(dt) : NULL;
}

/* D = op(A) op(B) (f32, beta 0) with strided batches; while measuring, records its workspace need. */
static inline cml_status conv_gemm(cml_ctx *ctx, conv_ws *w, cml_op op_a, cml_op op_b, long long M, long long N,
                                   long long K, long long batch, const float *A, long long lda, long long stride_a,
                                   const float *B, long long ldb, long long stride_b, float *D, long long ldd,
                                   long long stride_d) {
    cml_gemm_desc d = cml_gemm_desc_f32(op_a, op_b, M, N, K, batch);
    d.lda = lda, d.ldb = ldb, d.ldc = ldd, d.ldd = ldd;
    d.stride_a = stride_a, d.stride_b = stride_b, d.stride_c = stride_d, d.stride_d = stride_d;
    if (!w->run) {
        size_t bytes = 0;
        CML_TRY(cml_gemm_workspace_size(ctx, &d, &bytes));
        if (bytes > w->gemm_bytes) w->gemm_bytes = bytes;
        return CML_OK;
    }
    return cml_gemm(ctx, &d, D, A, B, NULL);
}

/* Images per pass for per-image scratch of `per_image` floats. */
static inline long long conv_pass_images(long long per_image, long long N) {
    long long nb = per_image > 0 ? CONV_PASS_FLOATS / per_image : N;
    if (nb < 1) nb = 1;
    if (nb > N) nb = N;
    return nb;
}

/* ---- layout kernels (conv_layout.cu); each returns at once while measuring ---------------------- */

/* col (f32) of images x[0 .. nimg) (dtype g->dt; x points at the first of them).
 * NCHW: chunk layout with nbc images per chunk: image t = j nbc + i of chunk j (len_j images)
 * lands at col[j nbc CRS PQ + crs len_j PQ + i PQ + pq], so each chunk is one (C R S, len_j P Q)
 * matrix; nbc = 1 is the plain (nimg, C R S, P Q). NHWC: rows (nimg P Q, C R S) (nbc unused). */
cml_status cml__conv_im2col(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, float *col, const void *x,
                            long long nimg, long long nbc);
/* dx (dtype) of images [0 .. nimg) from their column gradients (plain layout), each element summing its
 * column entries in the CPU's order. */
cml_status cml__conv_col2im(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, void *dx, const float *col,
                            long long nimg);
/* dst (f32) = src (dtype) rows re-laid out per chunk like im2col's NCHW layout: src (nimg, rows, PQ),
 * dst chunk j a (rows, len_j PQ) matrix. nbc = 1 is a plain conversion. */
cml_status cml__conv_chunk_rows(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, float *dst, const void *src,
                                long long nimg, long long rows, long long nbc);
/* y (dtype) = acc (f32; may alias y when f32) + bias (dtype, K; may be NULL) for nimg images of y's layout. */
cml_status cml__conv_epilogue(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, void *y, const float *acc,
                              const void *bias, long long nimg);
/* dst (f32, n) = src (dtype). */
cml_status cml__conv_to_f32(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, float *dst, const void *src,
                            long long n);
/* dst (dtype, n) = sum over j in order of part[j n + i] (f32, (J, n)). */
cml_status cml__conv_sum_partials(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, void *dst, const float *part,
                                  long long n, long long J);
/* dbias (dtype, K) = the sum of dy over images and positions (deterministic); scratch from w. */
cml_status cml__conv_bias_grad(cml_ctx *ctx, conv_ws *w, const conv_geom *g, void *dbias, const void *dy);

#endif
