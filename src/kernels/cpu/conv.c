/* CPU convolution: im2col + cml_gemm, per image and group.
 *
 * The column matrix of one image holds, for every output position, the input
 * patch it sees (zeros where the patch hangs over the padding):
 *   NCHW: col (C R S, P Q), rows in (c, r, s) order, so group g's rows are the
 *         contiguous block g*Cg*R*S.. and match w (K, Cg, R, S) row for row;
 *   NHWC: col (P Q, C R S), each row in (g, r, s, cg) order, so group g's
 *         columns are the contiguous block g*R*S*Cg.. and match w (K, R, S, Cg).
 * A 1x1 kernel with stride 1 and no padding needs no column matrix: the input
 * image already is one (with leading dimension C in NHWC).
 *
 *   fwd:        y_g  = w_g col_g            (NCHW)   y_g = col_g w_g^T   (NHWC)
 *   bwd_data:   dcol = w_g^T dy_g, col2im   (NCHW)   dcol = dy_g w_g     (NHWC)
 *   bwd_filter: dw_g += dy_g col_g^T        (NCHW)   dw_g += dy_g^T col_g (NHWC)
 *
 * Images are independent in fwd and bwd_data, so with several threads each
 * thread takes whole images (its own column buffer, single-threaded GEMMs:
 * OpenMP OpenBLAS does not nest inside a parallel region); a single image, or
 * a pthread build of OpenBLAS, uses one multithreaded GEMM per group instead. col2im adds in a fixed loop
 * order. bwd_filter splits the batch into at most FILTER_CHUNKS chunks whose
 * boundaries depend only on N; each chunk accumulates its images in order
 * (GEMM beta = 1) and the chunks' partial sums are added in chunk order, so
 * the result does not depend on the thread count. dbias sums each image's
 * rows in f32 lanes, then images and chunks in double, in the same fixed order.
 *
 * All scratch (column buffers, partial sums, f32 copies of narrow-dtype
 * operands) is carved from one cml_ctx_workspace call. The GEMMs are f32 with
 * no bias and C == D, for which cml_gemm needs no workspace of its own, so the
 * carved pointers stay valid. */
#include <limits.h>
#include <omp.h>
#include <string.h>

#include <cblas.h>

#include "kernels/cpu/cpu_vision.h"
#include "runtime/error.h"

#define FILTER_CHUNKS 8

typedef struct geom {
    int64_t N, C, H, W, K, R, S, P, Q;
    int64_t sh, sw, ph, pw, dh, dw, G, Cg, Kg;
    int64_t HW, PQ, RSCg, CRS;
    bool cl;     /* NHWC */
    bool direct; /* 1x1, stride 1, no padding: the image is its own column matrix */
    int64_t col_elems; /* per-thread column buffer (0 when direct) */
    int64_t col_ld;    /* leading dim of the column matrix */
} geom;

static geom make_geom(const cml_conv2d_desc *d, int64_t P, int64_t Q) {
    geom g;
    g.N = d->N, g.C = d->C, g.H = d->H, g.W = d->W, g.K = d->K, g.R = d->R, g.S = d->S, g.P = P, g.Q = Q;
    g.sh = d->stride_h, g.sw = d->stride_w, g.ph = d->pad_h, g.pw = d->pad_w, g.dh = d->dil_h, g.dw = d->dil_w;
    g.G = d->groups, g.Cg = d->C / d->groups, g.Kg = d->K / d->groups;
    g.HW = g.H * g.W, g.PQ = P * Q, g.RSCg = g.R * g.S * g.Cg, g.CRS = g.C * g.R * g.S;
    g.cl = d->channels_last;
    g.direct = g.R == 1 && g.S == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
    g.col_elems = g.direct ? 0 : g.CRS * g.PQ;
    g.col_ld = g.cl ? g.CRS : g.PQ;
    return g;
}

static cml_status check_blas_range(const char *fn, const geom *g) {
    if (g->PQ > INT_MAX || g->CRS > INT_MAX || g->K > INT_MAX || g->HW > INT_MAX)
        return cml__error(CML_ERR_UNSUPPORTED, "%s: P*Q=%lld, C*R*S=%lld or K=%lld exceed the 32-bit BLAS int range",
                          fn, (long long)g->PQ, (long long)g->CRS, (long long)g->K);
    return CML_OK;
}

/* D (M x N, ldd) = op(A) op(B) + beta D, all f32. */
static cml_status gemm(cml_ctx *ctx, cml_op op_a, cml_op op_b, int64_t M, int64_t N, int64_t K, const float *A,
                       int64_t lda, const float *B, int64_t ldb, float *D, int64_t ldd, float beta) {
    cml_gemm_desc d = cml_gemm_desc_f32(op_a, op_b, M, N, K, 1);
    d.lda = lda;
    d.ldb = ldb;
    d.ldc = ldd;
    d.ldd = ldd;
    d.beta = beta;
    return cml_gemm(ctx, &d, D, A, B, beta != 0.0f ? D : NULL);
}

/* The output columns q in [*lo, *hi) whose input column q*stride + off lies in [0, W). */
static void valid_range(int64_t off, int64_t stride, int64_t W, int64_t Q, int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int64_t h = W - 1 - off < 0 ? 0 : (W - 1 - off) / stride + 1;
    if (h > Q) h = Q;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* ---- im2col / col2im ---------------------------------------------------------- */

/* Short copies and fills: rows here are often 5 to 30 floats, where a libc call
 * per row costs more than the copy. Fixed-size memcpy/memset compile to plain
 * vector moves. */
static inline void copy_floats(float *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) memcpy(dst + i, src + i, 8 * sizeof(float));
    if (i + 4 <= n) {
        memcpy(dst + i, src + i, 4 * sizeof(float));
        i += 4;
    }
    for (; i < n; i++) dst[i] = src[i];
}

static inline void zero_floats(float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) memset(dst + i, 0, 8 * sizeof(float));
    for (; i < n; i++) dst[i] = 0.0f;
}

static inline void add_floats(float *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

static void im2col_nchw(const geom *g, const float *x, float *col) {
    const int64_t sw = g->sw;
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t r = 0; r < g->R; r++)
            for (int64_t s = 0; s < g->S; s++) {
                float *row = col + ((c * g->R + r) * g->S + s) * g->PQ;
                int64_t w_off = s * g->dw - g->pw, q_lo, q_hi;
                valid_range(w_off, g->sw, g->W, g->Q, &q_lo, &q_hi);
                for (int64_t p = 0; p < g->P; p++) {
                    float *out = row + p * g->Q;
                    int64_t ih = p * g->sh - g->ph + r * g->dh;
                    if (ih < 0 || ih >= g->H) {
                        zero_floats(out, g->Q);
                        continue;
                    }
                    const float *in = x + (c * g->H + ih) * g->W + w_off;
                    zero_floats(out, q_lo);
                    if (sw == 1) copy_floats(out + q_lo, in + q_lo, q_hi - q_lo);
                    else for (int64_t q = q_lo; q < q_hi; q++) out[q] = in[q * sw];
                    zero_floats(out + q_hi, g->Q - q_hi);
                }
            }
}

/* dx (C, H, W) += the columns, in (c, r, s, p, q) order. */
static void col2im_nchw(const geom *g, const float *col, float *dx) {
    const int64_t sw = g->sw;
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t r = 0; r < g->R; r++)
            for (int64_t s = 0; s < g->S; s++) {
                const float *row = col + ((c * g->R + r) * g->S + s) * g->PQ;
                int64_t w_off = s * g->dw - g->pw, q_lo, q_hi;
                valid_range(w_off, g->sw, g->W, g->Q, &q_lo, &q_hi);
                for (int64_t p = 0; p < g->P; p++) {
                    int64_t ih = p * g->sh - g->ph + r * g->dh;
                    if (ih < 0 || ih >= g->H) continue;
                    const float *in = row + p * g->Q;
                    float *out = dx + (c * g->H + ih) * g->W + w_off;
                    if (sw == 1) add_floats(out + q_lo, in + q_lo, q_hi - q_lo);
                    else for (int64_t q = q_lo; q < q_hi; q++) out[q * sw] += in[q];
                }
            }
}

/* For one window row r of output (p, q) with groups == 1 and dil_w == 1, the S
 * window columns are one contiguous run of S*C input floats: the valid part
 * [*s_lo, *s_hi) of it, for the input column iw0 = q*sw - pw of s = 0. */
static void run_range(const geom *g, int64_t iw0, int64_t *s_lo, int64_t *s_hi) {
    int64_t lo = iw0 < 0 ? -iw0 : 0, hi = g->W - iw0 < g->S ? g->W - iw0 : g->S;
    if (hi < lo) hi = lo;
    *s_lo = lo;
    *s_hi = hi;
}

static void im2col_nhwc(const geom *g, const float *x, float *col) {
    bool runs = g->G == 1 && g->dw == 1; /* copy whole window rows at once */
    for (int64_t p = 0; p < g->P; p++)
        for (int64_t q = 0; q < g->Q; q++) {
            float *row = col + (p * g->Q + q) * g->CRS;
            int64_t iw0 = q * g->sw - g->pw;
            for (int64_t r = 0; r < g->R; r++) {
                int64_t ih = p * g->sh - g->ph + r * g->dh;
                if (runs) {
                    float *out = row + r * g->S * g->C;
                    if (ih < 0 || ih >= g->H) {
                        zero_floats(out, g->S * g->C);
                        continue;
                    }
                    int64_t s_lo, s_hi;
                    run_range(g, iw0, &s_lo, &s_hi);
                    zero_floats(out, s_lo * g->C);
                    copy_floats(out + s_lo * g->C, x + (ih * g->W + iw0 + s_lo) * g->C, (s_hi - s_lo) * g->C);
                    zero_floats(out + s_hi * g->C, (g->S - s_hi) * g->C);
                    continue;
                }
                for (int64_t s = 0; s < g->S; s++) {
                    int64_t iw = iw0 + s * g->dw;
                    bool inside = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W;
                    const float *in = x + (ih * g->W + iw) * g->C;
                    float *out = row + (r * g->S + s) * g->Cg;
                    for (int64_t gi = 0; gi < g->G; gi++) {
                        if (inside) copy_floats(out + gi * g->RSCg, in + gi * g->Cg, g->Cg);
                        else zero_floats(out + gi * g->RSCg, g->Cg);
                    }
                }
            }
        }
}

/* dx (H, W, C) += the columns, in (p, q, r, s, g, c) order. */
static void col2im_nhwc(const geom *g, const float *col, float *dx) {
    bool runs = g->G == 1 && g->dw == 1;
    for (int64_t p = 0; p < g->P; p++)
        for (int64_t q = 0; q < g->Q; q++) {
            const float *row = col + (p * g->Q + q) * g->CRS;
            int64_t iw0 = q * g->sw - g->pw;
            for (int64_t r = 0; r < g->R; r++) {
                int64_t ih = p * g->sh - g->ph + r * g->dh;
                if (ih < 0 || ih >= g->H) continue;
                if (runs) { /* the same (s, c) order, as one run */
                    int64_t s_lo, s_hi;
                    run_range(g, iw0, &s_lo, &s_hi);
                    add_floats(dx + (ih * g->W + iw0 + s_lo) * g->C, row + (r * g->S + s_lo) * g->C,
                               (s_hi - s_lo) * g->C);
                    continue;
                }
                for (int64_t s = 0; s < g->S; s++) {
                    int64_t iw = iw0 + s * g->dw;
                    if (iw < 0 || iw >= g->W) continue;
                    float *out = dx + (ih * g->W + iw) * g->C;
                    const float *in = row + (r * g->S + s) * g->Cg;
                    for (int64_t gi = 0; gi < g->G; gi++) add_floats(out + gi * g->Cg, in + gi * g->RSCg, g->Cg);
                }
            }
        }
}

/* The column matrix of image x_n: built in col, or x_n itself when direct. */
static const float *columns(const geom *g, const float *x_n, float *col) {
    if (g->direct) return x_n;
    if (g->cl) im2col_nhwc(g, x_n, col);
    else im2col_nchw(g, x_n, col);
    return col;
}

/* Group gi's block of a column matrix. */
static int64_t col_group_offset(const geom *g, int64_t gi) { return g->cl ? gi * g->RSCg : gi * g->RSCg * g->PQ; }

/* Whether GEMMs may run inside our own parallel loops. OpenMP OpenBLAS then runs
 * them on the calling thread; the pthread build would start its own threads in
 * every call (measured: 2.5x slower CIFAR training on 2 cores), so with it the
 * images run in order with multithreaded GEMMs instead. */
static bool blas_nests(void) { return openblas_get_parallel() != 1; }

static int max_threads(void) {
    int t = omp_get_max_threads();
    return t < 1 ? 1 : t;
}

/* ---- forward ---------------------------------------------------------------------- */

typedef struct conv_bufs {
    float *x, *w, *y, *bias, *col; /* f32 views */
} conv_bufs;

static cml_status fwd_image(cml_ctx *ctx, const geom *g, const conv_bufs *b, int64_t n, float *col) {
    const float *x_n = b->x + n * g->C * g->HW;
    float *y_n = b->y + n * g->K * g->PQ;
    const float *cm = columns(g, x_n, col);
    for (int64_t gi = 0; gi < g->G; gi++) {
        const float *col_g = cm + col_group_offset(g, gi), *w_g = b->w + gi * g->Kg * g->RSCg;
        cml_status s = g->cl ? gemm(ctx, CML_OP_N, CML_OP_T, g->PQ, g->Kg, g->RSCg, col_g, g->col_ld, w_g, g->RSCg,
                                    y_n + gi * g->Kg, g->K, 0.0f)
                             : gemm(ctx, CML_OP_N, CML_OP_N, g->Kg, g->PQ, g->RSCg, w_g, g->RSCg, col_g, g->col_ld,
                                    y_n + gi * g->Kg * g->PQ, g->PQ, 0.0f);
        if (s != CML_OK) return s;
    }
    if (b->bias) {
        if (g->cl) {
            for (int64_t i = 0; i < g->PQ; i++)
                for (int64_t k = 0; k < g->K; k++) y_n[i * g->K + k] += b->bias[k];
        } else {
            for (int64_t k = 0; k < g->K; k++)
                for (int64_t i = 0; i < g->PQ; i++) y_n[k * g->PQ + i] += b->bias[k];
        }
    }
    return CML_OK;
}

/* Runs fn over every image: in parallel over images (one column buffer per
 * thread) when there are several images and threads, else in order. */
typedef cml_status (*image_fn)(cml_ctx *ctx, const geom *g, const conv_bufs *b, int64_t n, float *col);

static cml_status for_each_image(const char *fn_name, cml_ctx *ctx, const geom *g, const conv_bufs *b,
                                 image_fn fn) {
    bool par = g->N > 1 && max_threads() > 1 && blas_nests();
    int failed = 0;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t n = 0; n < g->N; n++) {
        int tid = omp_get_thread_num();
        if (fn(ctx, g, b, n, b->col + (int64_t)tid * g->col_elems) != CML_OK) {
#pragma omp atomic write
            failed = 1;
        }
    }
    if (failed) return cml__error(CML_ERR_INTERNAL, "%s: a GEMM failed inside the per-image loop", fn_name);
    return CML_OK;
}

cml_status cml__conv2d_fwd_cpu(cml_ctx *ctx, const cml_conv2d_desc *d, int64_t P, int64_t Q, void *y,
                               const void *x, const void *w, const void *bias) {
    static const char fn[] = "cml_conv2d_fwd";
    geom g = make_geom(d, P, Q);
    CML_TRY(check_blas_range(fn, &g));
    int T = max_threads();
    int64_t nx = g.N * g.C * g.HW, nw = g.K * g.RSCg, ny = g.N * g.K * g.PQ;
    cml__carve c = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) CML_TRY(cml__carve_begin(ctx, &c));
        conv_bufs b;
        b.x = cml__carve_f32(&c, x, nx, d->dtype, pass == 1);
        b.w = cml__carve_f32(&c, w, nw, d->dtype, pass == 1);
        b.bias = bias ? cml__carve_f32(&c, bias, g.K, d->dtype, pass == 1) : NULL;
        b.y = cml__carve_f32(&c, y, ny, d->dtype, false);
        b.col = cml__carve_take(&c, (int64_t)T * g.col_elems, sizeof(float));
        if (pass == 0) continue;
        CML_TRY(for_each_image(fn, ctx, &g, &b, fwd_image));
        if (d->dtype != CML_F32) cml_dtype_convert(y, d->dtype, b.y, CML_F32, ny);
    }
    return CML_OK;
}

/* ---- backward data ------------------------------------------------------------------ */

static cml_status bwd_data_image(cml_ctx *ctx, const geom *g, const conv_bufs *b, int64_t n, float *col) {
    /* here b->x is dx and b->y is dy */
    float *dx_n = b->x + n * g->C * g->HW;
    const float *dy_n = b->y + n * g->K * g->PQ;
    float *dcol = g->direct ? dx_n : col;
    for (int64_t gi = 0; gi < g->G; gi++) {
        const float *w_g = b->w + gi * g->Kg * g->RSCg;
        float *dcol_g = dcol + col_group_offset(g, gi);
        cml_status s = g->cl ? gemm(ctx, CML_OP_N, CML_OP_N, g->PQ, g->RSCg, g->Kg, dy_n + gi * g->Kg, g->K, w_g,
                                    g->RSCg, dcol_g, g->col_ld, 0.0f)
                             : gemm(ctx, CML_OP_T, CML_OP_N, g->RSCg, g->PQ, g->Kg, w_g, g->RSCg,
                                    dy_n + gi * g->Kg * g->PQ, g->PQ, dcol_g, g->col_ld, 0.0f);
        if (s != CML_OK) return s;
    }
    if (!g->direct) {
        memset(dx_n, 0, sizeof(float) * (size_t)(g->C * g->HW));
        if (g->cl) col2im_nhwc(g, col, dx_n);
        else col2im_nchw(g, col, dx_n);
    }
    return CML_OK;
}

cml_status cml__conv2d_bwd_data_cpu(cml_ctx *ctx, const cml_conv2d_desc *d, int64_t P, int64_t Q, void *dx,
                                    const void *dy, const void *w) {
    static const char fn[] = "cml_conv2d_bwd_data";
    geom g = make_geom(d, P, Q);
    CML_TRY(check_blas_range(fn, &g));
    int T = max_threads();
    int64_t nx = g.N * g.C * g.HW, nw = g.K * g.RSCg, ny = g.N * g.K * g.PQ;
    cml__carve c = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) CML_TRY(cml__carve_begin(ctx, &c));
        conv_bufs b;
        b.x = cml__carve_f32(&c, dx, nx, d->dtype, false);
        b.w = cml__carve_f32(&c, w, nw, d->dtype, pass == 1);
        b.y = cml__carve_f32(&c, dy, ny, d->dtype, pass == 1);
        b.bias = NULL;
        b.col = cml__carve_take(&c, (int64_t)T * g.col_elems, sizeof(float));
        if (pass == 0) continue;
        CML_TRY(for_each_image(fn, ctx, &g, &b, bwd_data_image));
        if (d->dtype != CML_F32) cml_dtype_convert(dx, d->dtype, b.x, CML_F32, nx);
    }
    return CML_OK;
}

/* ---- backward filter ----------------------------------------------------------------- */

#define LANES 8

/* The sum of a row in a fixed order: LANES interleaved f32 partial sums (which
 * vectorize), added up in double. */
static double row_sum(const float *row, int64_t n) {
    float lane[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) lane[j] += row[i + j];
    double s = 0.0;
    for (int j = 0; j < LANES; j++) s += (double)lane[j];
    for (; i < n; i++) s += (double)row[i];
    return s;
}

/* db[k] += the sum of image dy_n's gradients for output channel k. */
static void add_bias_grad(const geom *g, const float *dy_n, double *db) {
    if (!g->cl) {
        for (int64_t k = 0; k < g->K; k++) db[k] += row_sum(dy_n + k * g->PQ, g->PQ);
        return;
    }
    for (int64_t k0 = 0; k0 < g->K; k0 += 64) { /* f32 per image, positions in order */
        int64_t len = g->K - k0 < 64 ? g->K - k0 : 64;
        float part[64] = {0};
        for (int64_t i = 0; i < g->PQ; i++)
            for (int64_t k = 0; k < len; k++) part[k] += dy_n[i * g->K + k0 + k];
        for (int64_t k = 0; k < len; k++) db[k0 + k] += (double)part[k];
    }
}

/* dw (K, RSCg) = the sum over images [n0, n1) in order (GEMM beta = 1 after the
 * first), and db (K, when not NULL) = the same images' bias gradients in double. */
static cml_status filter_chunk(cml_ctx *ctx, const geom *g, const float *x, const float *dy, float *dw, double *db,
                               int64_t n0, int64_t n1, float *col) {
    if (db)
        for (int64_t k = 0; k < g->K; k++) db[k] = 0.0;
    for (int64_t n = n0; n < n1; n++) {
        const float *cm = columns(g, x + n * g->C * g->HW, col);
        const float *dy_n = dy + n * g->K * g->PQ;
        float beta = n == n0 ? 0.0f : 1.0f;
        for (int64_t gi = 0; gi < g->G; gi++) {
            const float *col_g = cm + col_group_offset(g, gi);
            float *dw_g = dw + gi * g->Kg * g->RSCg;
            cml_status s = g->cl ? gemm(ctx, CML_OP_T, CML_OP_N, g->Kg, g->RSCg, g->PQ, dy_n + gi * g->Kg, g->K,
                                        col_g, g->col_ld, dw_g, g->RSCg, beta)
                                 : gemm(ctx, CML_OP_N, CML_OP_T, g->Kg, g->RSCg, g->PQ, dy_n + gi * g->Kg * g->PQ,
                                        g->PQ, col_g, g->col_ld, dw_g, g->RSCg, beta);
            if (s != CML_OK) return s;
        }
        if (db) add_bias_grad(g, dy_n, db);
    }
    return CML_OK;
}

cml_status cml__conv2d_bwd_filter_cpu(cml_ctx *ctx, const cml_conv2d_desc *d, int64_t P, int64_t Q, void *dw,
                                      void *dbias, const void *dy, const void *x) {
    static const char fn[] = "cml_conv2d_bwd_filter";
    geom g = make_geom(d, P, Q);
    CML_TRY(check_blas_range(fn, &g));
    int T = max_threads();
    int64_t nx = g.N * g.C * g.HW, nw = g.K * g.RSCg, ny = g.N * g.K * g.PQ;
    int64_t chunks = g.N < FILTER_CHUNKS ? g.N : FILTER_CHUNKS;
    cml__carve c = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) CML_TRY(cml__carve_begin(ctx, &c));
        const float *x32 = cml__carve_f32(&c, x, nx, d->dtype, pass == 1);
        const float *dy32 = cml__carve_f32(&c, dy, ny, d->dtype, pass == 1);
        float *dw32 = cml__carve_f32(&c, dw, nw, d->dtype, false);
        float *db32 = dbias ? cml__carve_f32(&c, dbias, g.K, d->dtype, false) : NULL;
        double *db_part = dbias ? cml__carve_take(&c, chunks * g.K, sizeof(double)) : NULL;
        /* chunk 0 accumulates straight into dw; the others into partial buffers */
        float *partial = cml__carve_take(&c, (chunks > 1 ? chunks - 1 : 0) * nw, sizeof(float));
        float *col = cml__carve_take(&c, (int64_t)T * g.col_elems, sizeof(float));
        if (pass == 0) continue;
        if (g.N == 0) {
            memset(dw32, 0, sizeof(float) * (size_t)nw);
            if (db32) memset(db32, 0, sizeof(float) * (size_t)g.K);
        } else {
            bool par = chunks > 1 && T > 1 && blas_nests();
            int failed = 0;
#pragma omp parallel for schedule(static) if (par)
            for (int64_t j = 0; j < chunks; j++) {
                int tid = omp_get_thread_num();
                float *dst = j == 0 ? dw32 : partial + (j - 1) * nw;
                if (filter_chunk(ctx, &g, x32, dy32, dst, db_part ? db_part + j * g.K : NULL, j * g.N / chunks,
                                 (j + 1) * g.N / chunks, col + (int64_t)tid * g.col_elems) != CML_OK) {
#pragma omp atomic write
                    failed = 1;
                }
            }
            if (failed) return cml__error(CML_ERR_INTERNAL, "%s: a GEMM failed inside the per-chunk loop", fn);
#pragma omp parallel for schedule(static) if (nw * chunks >= 32768)
            for (int64_t i = 0; i < nw; i++) {
                float s = dw32[i];
                for (int64_t j = 1; j < chunks; j++) s += partial[(j - 1) * nw + i];
                dw32[i] = s;
            }
            for (int64_t k = 0; db32 && k < g.K; k++) {
                double sum = 0.0;
                for (int64_t j = 0; j < chunks; j++) sum += db_part[j * g.K + k];
                db32[k] = (float)sum;
            }
        }
        if (d->dtype != CML_F32) {
            cml_dtype_convert(dw, d->dtype, dw32, CML_F32, nw);
            if (dbias) cml_dtype_convert(dbias, d->dtype, db32, CML_F32, g.K);
        }
    }
    return CML_OK;
}
