/* The CUDA convolution's memory-bound kernels around its GEMMs: im2col
 * (with f16/bf16 -> f32 conversion), col2im as a gather (one thread per input
 * element adds its column entries in a fixed order: no atomics), the NCHW
 * chunk re-layout of dy for the filter gradient, the forward's bias/convert
 * epilogue, the ordered sum of filter-gradient partials and the bias gradient.
 * All are grid-stride loops over one output element per thread. */
#include "kernels/cuda/common/channel_sums.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/conv/conv_internal.cuh"

#define BLOCK 256

/* Kernel geometry: the sizes as they are used on the device. */
typedef struct kgeom {
    long long C, H, W, K, R, S, P, Q, sh, sw, ph, pw, dh, dw, G, Cg, HW, PQ, RSCg, CRS;
} kgeom;

static kgeom to_kgeom(const conv_geom *g) {
    kgeom k = {g->C, g->H, g->W, g->K, g->R, g->S, g->P, g->Q, g->sh, g->sw, g->ph, g->pw,
               g->dh, g->dw, g->G, g->Cg, g->HW, g->PQ, g->RSCg, g->CRS};
    return k;
}

/* Where element (t, row, pq) of nimg images of (rows, PQ) matrices lands in the chunk layout. */
static __device__ __forceinline__ long long chunk_offset(long long t, long long row, long long pq, long long rows,
                                                         long long PQ, long long nbc, long long nimg) {
    const long long j = cml__div(t, nbc), i = t - j * nbc;
    const long long len = nimg - j * nbc < nbc ? nimg - j * nbc : nbc;
    return j * nbc * rows * PQ + row * len * PQ + i * PQ + pq;
}

/* ---- im2col ---------------------------------------------------------------------------------------- */

template <int DT>
static __global__ void im2col_nchw_kernel(float *col, const void *x, kgeom g, long long nimg, long long nbc) {
    const long long total = nimg * g.CRS * g.PQ, RS = g.R * g.S;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long rest = cml__div(e, g.PQ), pq = e - rest * g.PQ;
        const long long t = cml__div(rest, g.CRS), crs = rest - t * g.CRS;
        const long long c = cml__div(crs, RS), rs = crs - c * RS, r = cml__div(rs, g.S), s = rs - r * g.S;
        const long long p = cml__div(pq, g.Q), q = pq - p * g.Q;
        const long long ih = p * g.sh - g.ph + r * g.dh, iw = q * g.sw - g.pw + s * g.dw;
        float v = 0.0f;
        if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) v = cml__ld<DT>(x, (t * g.C + c) * g.HW + ih * g.W + iw);
        col[nbc == 1 ? e : chunk_offset(t, crs, pq, g.CRS, g.PQ, nbc, nimg)] = v;
    }
}

template <int DT>
static __global__ void im2col_nhwc_kernel(float *col, const void *x, kgeom g, long long nimg) {
    const long long total = nimg * g.PQ * g.CRS;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long row = cml__div(e, g.CRS), k = e - row * g.CRS; /* k in (g, r, s, cg) order */
        const long long rest = cml__div(k, g.Cg), cg = k - rest * g.Cg;
        const long long rest2 = cml__div(rest, g.S), s = rest - rest2 * g.S;
        const long long gi = cml__div(rest2, g.R), r = rest2 - gi * g.R;
        const long long t = cml__div(row, g.PQ), pq = row - t * g.PQ, p = cml__div(pq, g.Q), q = pq - p * g.Q;
        const long long ih = p * g.sh - g.ph + r * g.dh, iw = q * g.sw - g.pw + s * g.dw;
        float v = 0.0f;
        if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
            v = cml__ld<DT>(x, (t * g.HW + ih * g.W + iw) * g.C + gi * g.Cg + cg);
        col[e] = v;
    }
}

/* ---- col2im (gather) ------------------------------------------------------------------------------------ */

/* The output index o in [0, n_out) with o * stride - pad + k * dil == i, or -1. */
static __device__ __forceinline__ long long source_of(long long i, long long k, long long stride, long long pad,
                                                      long long dil, long long n_out) {
    const long long a = i + pad - k * dil;
    if (a < 0) return -1;
    const long long o = cml__div(a, stride);
    return o * stride == a && o < n_out ? o : -1;
}

/* dx (t, c, h, w) = the sum over (r, s) in order of its column entries: the CPU's col2im order. */
template <int DT>
static __global__ void col2im_nchw_kernel(void *dx, const float *col, kgeom g, long long nimg) {
    const long long total = nimg * g.C * g.HW;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long plane = cml__div(e, g.HW), hw = e - plane * g.HW, h = cml__div(hw, g.W), w = hw - h * g.W;
        const long long t = cml__div(plane, g.C), c = plane - t * g.C;
        const float *img = col + t * g.CRS * g.PQ;
        float acc = 0.0f;
        for (long long r = 0; r < g.R; r++) {
            const long long p = source_of(h, r, g.sh, g.ph, g.dh, g.P);
            if (p < 0) continue;
            for (long long s = 0; s < g.S; s++) {
                const long long q = source_of(w, s, g.sw, g.pw, g.dw, g.Q);
                if (q >= 0) acc += img[((c * g.R + r) * g.S + s) * g.PQ + p * g.Q + q];
            }
        }
        cml__st<DT>(dx, e, acc);
    }
}

/* dx (t, h, w, c): the CPU adds in (p, q) order, which for one input element is r, then s, descending. */
template <int DT>
static __global__ void col2im_nhwc_kernel(void *dx, const float *col, kgeom g, long long nimg) {
    const long long total = nimg * g.HW * g.C;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long pix = cml__div(e, g.C), c = e - pix * g.C;
        const long long t = cml__div(pix, g.HW), hw = pix - t * g.HW, h = cml__div(hw, g.W), w = hw - h * g.W;
        const long long gi = cml__div(c, g.Cg), cg = c - gi * g.Cg;
        const float *img = col + t * g.PQ * g.CRS + gi * g.RSCg + cg;
        float acc = 0.0f;
        for (long long r = g.R - 1; r >= 0; r--) {
            const long long p = source_of(h, r, g.sh, g.ph, g.dh, g.P);
            if (p < 0) continue;
            for (long long s = g.S - 1; s >= 0; s--) {
                const long long q = source_of(w, s, g.sw, g.pw, g.dw, g.Q);
                if (q >= 0) acc += img[(p * g.Q + q) * g.CRS + (r * g.S + s) * g.Cg];
            }
        }
        cml__st<DT>(dx, e, acc);
    }
}

/* ---- conversions, epilogue, partial sums -------------------------------------------------------------- */

template <int DT>
static __global__ void chunk_rows_kernel(float *dst, const void *src, long long nimg, long long rows, long long PQ,
                                         long long nbc) {
    const long long total = nimg * rows * PQ;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const float v = cml__ld<DT>(src, e);
        if (nbc == 1) {
            dst[e] = v;
            continue;
        }
        const long long rest = cml__div(e, PQ), pq = e - rest * PQ, t = cml__div(rest, rows), row = rest - t * rows;
        dst[chunk_offset(t, row, pq, rows, PQ, nbc, nimg)] = v;
    }
}

template <int DT>
static __global__ void epilogue_kernel(void *y, const float *acc, const void *bias, long long total, long long K,
                                       long long PQ, bool cl) {
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        float v = acc[e];
        if (bias) {
            const long long k = cl ? e - cml__div(e, K) * K : cml__div(e, PQ) - cml__div(e, K * PQ) * K;
            v += cml__ld<DT>(bias, k);
        }
        cml__st<DT>(y, e, v);
    }
}

template <int DT>
static __global__ void sum_partials_kernel(void *dst, const float *part, long long n, long long J) {
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
        float s = part[e];
        for (long long j = 1; j < J; j++) s += part[j * n + e];
        cml__st<DT>(dst, e, s);
    }
}

template <int DT>
static __global__ void bias_grad_kernel(void *dbias, const float2 *part, int splits, long long K) {
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < K) cml__st<DT>(dbias, k, (float)cml__channel_sums_total(part, splits, K, k).x);
}

/* ---- launchers ------------------------------------------------------------------------------------------- */

/* Runs KERNEL<DT> over `total` elements for g->dt (f32, f16 or bf16). */
#define LAUNCH_DT(name, KERNEL, total, ...)                                                             \
    do {                                                                                                \
        const unsigned grid_ = cml__grid_size(ctx, (total), BLOCK);                                      \
        cudaStream_t st_ = cml__stream(ctx);                                                            \
        if (g->dt == CML_F16) KERNEL<CML_F16><<<grid_, BLOCK, 0, st_>>>(__VA_ARGS__);                   \
        else if (g->dt == CML_BF16) KERNEL<CML_BF16><<<grid_, BLOCK, 0, st_>>>(__VA_ARGS__);            \
        else KERNEL<CML_F32><<<grid_, BLOCK, 0, st_>>>(__VA_ARGS__);                                    \
        return cml__cuda_check_launch(g->fn, name, cml_dtype_name(g->dt), (total), grid_, BLOCK);        \
    } while (0)

cml_status cml__conv_im2col(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, float *col, const void *x,
                            long long nimg, long long nbc) {
    if (!w->run) return CML_OK;
    const kgeom k = to_kgeom(g);
    const long long total = nimg * g->CRS * g->PQ;
    if (g->cl) LAUNCH_DT("im2col_nhwc_kernel", im2col_nhwc_kernel, total, col, x, k, nimg);
    LAUNCH_DT("im2col_nchw_kernel", im2col_nchw_kernel, total, col, x, k, nimg, nbc);
}

cml_status cml__conv_col2im(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, void *dx, const float *col,
                            long long nimg) {
    if (!w->run) return CML_OK;
    const kgeom k = to_kgeom(g);
    const long long total = nimg * g->C * g->HW;
    if (g->cl) LAUNCH_DT("col2im_nhwc_kernel", col2im_nhwc_kernel, total, dx, col, k, nimg);
    LAUNCH_DT("col2im_nchw_kernel", col2im_nchw_kernel, total, dx, col, k, nimg);
}

cml_status cml__conv_chunk_rows(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, float *dst, const void *src,
                                long long nimg, long long rows, long long nbc) {
    if (!w->run) return CML_OK;
    const long long total = nimg * rows * g->PQ;
    LAUNCH_DT("chunk_rows_kernel", chunk_rows_kernel, total, dst, src, nimg, rows, g->PQ, nbc);
}

cml_status cml__conv_to_f32(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, float *dst, const void *src,
                            long long n) {
    if (!w->run) return CML_OK;
    LAUNCH_DT("chunk_rows_kernel", chunk_rows_kernel, n, dst, src, 1, 1, n, 1);
}

cml_status cml__conv_epilogue(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, void *y, const float *acc,
                              const void *bias, long long nimg) {
    if (!w->run) return CML_OK;
    const long long total = nimg * g->K * g->PQ;
    LAUNCH_DT("epilogue_kernel", epilogue_kernel, total, y, acc, bias, total, g->K, g->PQ, g->cl);
}

cml_status cml__conv_sum_partials(cml_ctx *ctx, const conv_ws *w, const conv_geom *g, void *dst, const float *part,
                                  long long n, long long J) {
    if (!w->run) return CML_OK;
    LAUNCH_DT("sum_partials_kernel", sum_partials_kernel, n, dst, part, n, J);
}

template <int DT>
static cml_status bias_grad_launch(cml_ctx *ctx, const conv_geom *g, void *dbias, float2 *part, const void *dy,
                                   const cml__channel_sums_shape *sh) {
    CML_TRY(cml__channel_sums_launch<DT>(ctx, g->fn, part, dy, NULL, NULL, NULL, sh));
    const unsigned grid = (unsigned)((g->K + BLOCK - 1) / BLOCK);
    bias_grad_kernel<DT><<<grid, BLOCK, 0, cml__stream(ctx)>>>(dbias, part, sh->splits, g->K);
    return cml__cuda_check_launch(g->fn, "bias_grad_kernel", cml_dtype_name((cml_dtype)DT), g->K, grid, BLOCK);
}

cml_status cml__conv_bias_grad(cml_ctx *ctx, conv_ws *w, const conv_geom *g, void *dbias, const void *dy) {
    /* dy is (N, K, PQ) or (N PQ, K): per-channel sums like batch norm's */
    const cml__channel_sums_shape sh = cml__channel_sums_plan(g->N, g->K, g->PQ, g->cl);
    float2 *part = (float2 *)conv_ws_take(w, 2 * (long long)sh.splits * g->K);
    if (!w->run) return CML_OK;
    if (g->dt == CML_F16) return bias_grad_launch<CML_F16>(ctx, g, dbias, part, dy, &sh);
    if (g->dt == CML_BF16) return bias_grad_launch<CML_BF16>(ctx, g, dbias, part, dy, &sh);
    return bias_grad_launch<CML_F32>(ctx, g, dbias, part, dy, &sh);
}
