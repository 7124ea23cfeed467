/* CPU max / average pooling, NCHW and NHWC.
 *
 * Forward: every output element sees its window in (r, s) order. MAX keeps
 * the first maximum (a NaN, once seen, wins, as in PyTorch) and its flat
 * input index h*W + w; padding never wins. AVG sums in f32 and divides by
 * R*S (padding counts as zeros).
 * Backward: dx is zeroed and the gradients added in a fixed order: NCHW one
 * (n, c) plane per task in (p, q) order, NHWC one image per task in
 * (p, q, c) order, so overlapping windows give bitwise repeatable sums. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_vision.h"
#include "kernels/cpu/strided.h"

typedef struct pool_geom {
    int64_t N, C, H, W, R, S, P, Q, sh, sw, ph, pw;
    bool max, cl;
} pool_geom;

static pool_geom make_geom(const cml_pool2d_desc *d, int64_t P, int64_t Q) {
    pool_geom g = {d->N, d->C, d->H, d->W, d->R, d->S, P, Q, d->stride_h, d->stride_w, d->pad_h, d->pad_w,
                   d->mode == CML_POOL_MAX, d->channels_last};
    return g;
}

/* The window rows [*r0, *r1) that fall inside the input, for output row p. */
static void window(int64_t p, int64_t stride, int64_t pad, int64_t R, int64_t H, int64_t *r0, int64_t *r1) {
    int64_t start = p * stride - pad;
    *r0 = start < 0 ? -start : 0;
    *r1 = start + R > H ? H - start : R;
}

/* v replaces best: larger, or the first NaN. Bitwise (not short-circuit) so that the
 * callers' selects compile without data-dependent branches. */
static inline int better(float v, float best) { return (v > best) | ((v != v) & (best == best)); }

/* take ? a : b, branch-free (a data-dependent branch mispredicts on every other element). */
static inline float select_f32(int take, float a, float b) {
    uint32_t ua, ub, m = (uint32_t)0 - (uint32_t)take;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    ua = (ua & m) | (ub & ~m);
    float r;
    memcpy(&r, &ua, 4);
    return r;
}

static inline int64_t select_i64(int take, int64_t a, int64_t b) {
    int64_t m = -(int64_t)take;
    return (a & m) | (b & ~m);
}

/* The output columns q in [*lo, *hi) whose input column q*stride + off lies in [0, W). */
static void valid_cols(int64_t off, int64_t stride, int64_t W, int64_t Q, int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int64_t h = W - 1 - off < 0 ? 0 : (W - 1 - off) / stride + 1;
    if (h > Q) h = Q;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* One window offset's contribution to outputs q in [lo, hi) of a row: in[q * sw] is the
 * element (flat index base + q * sw) that output q sees at this offset. */
static inline void pass_row(bool max, const float *in, int64_t sw, float *yo, int64_t *io, int64_t lo, int64_t hi,
                            int64_t base) {
    if (!max) {
        for (int64_t q = lo; q < hi; q++) yo[q] += in[q * sw];
    } else if (io) {
        for (int64_t q = lo; q < hi; q++) {
            float v = in[q * sw], b = yo[q];
            int take = better(v, b);
            yo[q] = select_f32(take, v, b);
            io[q] = select_i64(take, base + q * sw, io[q]);
        }
    } else {
        for (int64_t q = lo; q < hi; q++) {
            float v = in[q * sw], b = yo[q];
            yo[q] = better(v, b) ? v : b;
        }
    }
}

/* Column tables shared by every row of every NCHW plane: for window column s,
 * the outputs [lo[s], hi[s]) that see an input column there; for output q, the
 * first input column its window covers. */
typedef struct col_tables {
    int64_t *lo, *hi, *first;
} col_tables;

static void make_col_tables(const pool_geom *g, col_tables *t) {
    for (int64_t s = 0; s < g->S; s++) valid_cols(s - g->pw, g->sw, g->W, g->Q, &t->lo[s], &t->hi[s]);
    for (int64_t q = 0; q < g->Q; q++) {
        int64_t s0, s1;
        window(q, g->sw, g->pw, g->S, g->W, &s0, &s1);
        t->first[q] = q * g->sw - g->pw + s0;
    }
}

/* One (n, c) plane of NCHW: x (H, W) -> y (P, Q). A whole output row is
 * updated per window offset (r, s), so each output still sees its window in
 * (r, s) order while the inner loop over q is branch-free and independent. */
static void fwd_plane(const pool_geom *g, const col_tables *t, const float *x, float *y, int64_t *idx) {
    float inv = 1.0f / (float)(g->R * g->S);
    for (int64_t p = 0; p < g->P; p++) {
        int64_t r0, r1, h0 = p * g->sh - g->ph;
        window(p, g->sh, g->ph, g->R, g->H, &r0, &r1);
        float *yo = y + p * g->Q;
        int64_t *io = idx ? idx + p * g->Q : NULL;
        /* max: start from -inf with the first in-window element as the index (all -inf: that one) */
        float init = g->max ? -INFINITY : 0.0f;
        for (int64_t q = 0; q < g->Q; q++) yo[q] = init;
        if (io)
            for (int64_t q = 0; q < g->Q; q++) io[q] = (h0 + r0) * g->W + t->first[q];
        for (int64_t r = r0; r < r1; r++) {
            const float *row = x + (h0 + r) * g->W;
            for (int64_t s = 0; s < g->S; s++) {
                int64_t off = s - g->pw, lo = t->lo[s], hi = t->hi[s];
                const float *in = row + off;
                int64_t base = (h0 + r) * g->W + off;
                /* constant strides let the compiler vectorize the common cases */
                if (g->sw == 2) pass_row(g->max, in, 2, yo, io, lo, hi, base);
                else if (g->sw == 1) pass_row(g->max, in, 1, yo, io, lo, hi, base);
                else pass_row(g->max, in, g->sw, yo, io, lo, hi, base);
            }
        }
        if (!g->max)
            for (int64_t q = 0; q < g->Q; q++) yo[q] *= inv;
    }
}

/* One output row (n, p) of NHWC: x (H, W, C) of image n -> y (Q, C). */
static void fwd_row_nhwc(const pool_geom *g, const float *x, int64_t p, float *y, int64_t *idx) {
    float inv = 1.0f / (float)(g->R * g->S);
    int64_t r0, r1, h0 = p * g->sh - g->ph, C = g->C;
    window(p, g->sh, g->ph, g->R, g->H, &r0, &r1);
    for (int64_t q = 0; q < g->Q; q++) {
        int64_t s0, s1, w0 = q * g->sw - g->pw;
        window(q, g->sw, g->pw, g->S, g->W, &s0, &s1);
        float *out = y + q * C;
        int64_t *oi = idx ? idx + q * C : NULL;
        bool first = true;
        for (int64_t r = r0; r < r1; r++)
            for (int64_t s = s0; s < s1; s++) {
                int64_t pos = (h0 + r) * g->W + w0 + s;
                const float *in = x + pos * C;
                if (first) {
                    for (int64_t c = 0; c < C; c++) out[c] = in[c];
                    if (oi)
                        for (int64_t c = 0; c < C; c++) oi[c] = pos;
                    first = false;
                } else if (!g->max) {
                    for (int64_t c = 0; c < C; c++) out[c] += in[c];
                } else if (oi) {
                    for (int64_t c = 0; c < C; c++) {
                        int take = better(in[c], out[c]);
                        out[c] = select_f32(take, in[c], out[c]);
                        oi[c] = select_i64(take, pos, oi[c]);
                    }
                } else {
                    for (int64_t c = 0; c < C; c++) out[c] = select_f32(better(in[c], out[c]), in[c], out[c]);
                }
            }
        if (!g->max)
            for (int64_t c = 0; c < C; c++) out[c] *= inv;
    }
}

cml_status cml__pool2d_fwd_cpu(cml_ctx *ctx, const cml_pool2d_desc *d, int64_t P, int64_t Q, void *y,
                               int64_t *indices, const void *x) {
    pool_geom g = make_geom(d, P, Q);
    int64_t nx = g.N * g.C * g.H * g.W, ny = g.N * g.C * P * Q;
    cml__carve c = {NULL, 0};
    const float *x32 = NULL;
    float *y32 = NULL;
    col_tables t = {NULL, NULL, NULL};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) CML_TRY(cml__carve_begin(ctx, &c));
        x32 = cml__carve_f32(&c, x, nx, d->dtype, pass == 1);
        y32 = cml__carve_f32(&c, y, ny, d->dtype, false);
        t.lo = cml__carve_take(&c, g.S, sizeof(int64_t));
        t.hi = cml__carve_take(&c, g.S, sizeof(int64_t));
        t.first = cml__carve_take(&c, Q, sizeof(int64_t));
    }
    bool par = ny >= CML__PARALLEL_MIN / 8;
    if (!g.cl) {
        int64_t HW = g.H * g.W, PQ = P * Q;
        make_col_tables(&g, &t);
#pragma omp parallel for schedule(static) if (par)
        for (int64_t pl = 0; pl < g.N * g.C; pl++)
            fwd_plane(&g, &t, x32 + pl * HW, y32 + pl * PQ, indices ? indices + pl * PQ : NULL);
    } else {
        int64_t img = g.H * g.W * g.C, row = Q * g.C;
#pragma omp parallel for schedule(static) if (par)
        for (int64_t np = 0; np < g.N * P; np++) {
            int64_t n = np / P, p = np % P;
            fwd_row_nhwc(&g, x32 + n * img, p, y32 + np * row, indices ? indices + np * row : NULL);
        }
    }
    if (d->dtype != CML_F32) cml_dtype_convert(y, d->dtype, y32, CML_F32, ny);
    return CML_OK;
}

/* ---- backward ------------------------------------------------------------------ */

static void bwd_plane(const pool_geom *g, float *dx, const float *dy, const int64_t *idx) {
    memset(dx, 0, sizeof(float) * (size_t)(g->H * g->W));
    float inv = 1.0f / (float)(g->R * g->S);
    for (int64_t p = 0; p < g->P; p++) {
        int64_t r0, r1, h0 = p * g->sh - g->ph;
        window(p, g->sh, g->ph, g->R, g->H, &r0, &r1);
        for (int64_t q = 0; q < g->Q; q++) {
            float gr = dy[p * g->Q + q];
            if (g->max) {
                dx[idx[p * g->Q + q]] += gr;
                continue;
            }
            int64_t s0, s1, w0 = q * g->sw - g->pw;
            window(q, g->sw, g->pw, g->S, g->W, &s0, &s1);
            gr *= inv;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t s = s0; s < s1; s++) dx[(h0 + r) * g->W + w0 + s] += gr;
        }
    }
}

static void bwd_image_nhwc(const pool_geom *g, float *dx, const float *dy, const int64_t *idx) {
    int64_t C = g->C;
    memset(dx, 0, sizeof(float) * (size_t)(g->H * g->W * C));
    float inv = 1.0f / (float)(g->R * g->S);
    for (int64_t p = 0; p < g->P; p++) {
        int64_t r0, r1, h0 = p * g->sh - g->ph;
        window(p, g->sh, g->ph, g->R, g->H, &r0, &r1);
        for (int64_t q = 0; q < g->Q; q++) {
            const float *gr = dy + (p * g->Q + q) * C;
            if (g->max) {
                const int64_t *oi = idx + (p * g->Q + q) * C;
                for (int64_t c = 0; c < C; c++) dx[oi[c] * C + c] += gr[c];
                continue;
            }
            int64_t s0, s1, w0 = q * g->sw - g->pw;
            window(q, g->sw, g->pw, g->S, g->W, &s0, &s1);
            for (int64_t r = r0; r < r1; r++)
                for (int64_t s = s0; s < s1; s++) {
                    float *out = dx + ((h0 + r) * g->W + w0 + s) * C;
                    for (int64_t c = 0; c < C; c++) out[c] += gr[c] * inv;
                }
        }
    }
}

cml_status cml__pool2d_bwd_cpu(cml_ctx *ctx, const cml_pool2d_desc *d, int64_t P, int64_t Q, void *dx,
                               const void *dy, const int64_t *indices) {
    pool_geom g = make_geom(d, P, Q);
    int64_t HW = g.H * g.W, nx = g.N * g.C * HW, ny = g.N * g.C * P * Q;
    if (indices) /* a bad index would write out of bounds: check them all first */
        for (int64_t i = 0; i < ny; i++)
            if (indices[i] < 0 || indices[i] >= HW)
                return cml__error(CML_ERR_INVALID_ARG, "cml_pool2d_bwd: indices[%lld]=%lld must be in [0, H*W=%lld)",
                                  (long long)i, (long long)indices[i], (long long)HW);
    cml__carve c = {NULL, 0};
    float *dx32 = NULL;
    const float *dy32 = NULL;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) CML_TRY(cml__carve_begin(ctx, &c));
        dx32 = cml__carve_f32(&c, dx, nx, d->dtype, false);
        dy32 = cml__carve_f32(&c, dy, ny, d->dtype, pass == 1);
    }
    bool par = nx >= CML__PARALLEL_MIN / 8;
    int64_t PQ = P * Q;
    if (!g.cl) {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t pl = 0; pl < g.N * g.C; pl++)
            bwd_plane(&g, dx32 + pl * HW, dy32 + pl * PQ, indices ? indices + pl * PQ : NULL);
    } else {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t n = 0; n < g.N; n++)
            bwd_image_nhwc(&g, dx32 + n * HW * g.C, dy32 + n * PQ * g.C, indices ? indices + n * PQ * g.C : NULL);
    }
    if (d->dtype != CML_F32) cml_dtype_convert(dx, d->dtype, dx32, CML_F32, nx);
    return CML_OK;
}
