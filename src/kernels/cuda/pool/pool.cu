/* CUDA max / average pooling, NCHW and NHWC, f32/f16/bf16 storage with f32
 * math: the CPU's arithmetic in the CPU's order (src/kernels/cpu/pool.c), so
 * results match it bit for bit.
 *
 * Forward: one thread per output element walks its window in (r, s) order.
 * MAX keeps the first maximum (a NaN, once seen, wins) and its flat input index
 * h * W + w, starting from the first in-window element; padding never wins.
 * AVG sums in f32 and multiplies by 1 / (R S) (padding counts as zeros).
 * Backward: one thread per input element gathers the outputs whose window
 * covers it, in (p, q) order, which is the order in which the CPU adds them;
 * no atomics. For MAX an output contributes where its recorded index points.
 * The indices live on the device, so the backward checks them as it reads
 * them: an index outside [0, H*W) matches no input (it is never followed) and
 * the lowest output position holding one is flagged in the context's
 * bad-index word (runtime/cuda_index_check.h; every output is read by some
 * input thread, since pad <= R/2 leaves every window an input element). The
 * call returns without waiting; the next wait for the stream
 * (cml_ctx_synchronize, a synchronous copy) returns CML_ERR_INVALID_ARG with
 * the CPU's message (CML_SYNC_CHECKS=1: the call itself waits and returns it).
 * Unlike the CPU, dx is written then, from the good indices. */
#include "kernels/cuda/common/channel_sums.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/cuda_index_check.h"

#define BLOCK 256

typedef struct pgeom {
    long long N, C, H, W, R, S, P, Q, sh, sw, ph, pw;
    bool max, cl;
    float inv; /* 1 / (R S) */
} pgeom;

template <int DT>
static __global__ void pool_fwd_kernel(void *y, int64_t *idx, const void *x, pgeom g) {
    const long long total = g.N * g.C * g.P * g.Q, HW = g.H * g.W;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long p, q, base, step;
        if (g.cl) { /* y (n, p, q, c) */
            const long long pix = cml__div(e, g.C), c = e - pix * g.C, n = cml__div(pix, g.P * g.Q), pq = pix - n * g.P * g.Q;
            p = cml__div(pq, g.Q), q = pq - p * g.Q, base = n * HW * g.C + c, step = g.C;
        } else { /* y (plane, p, q) */
            const long long plane = cml__div(e, g.P * g.Q), pq = e - plane * g.P * g.Q;
            p = cml__div(pq, g.Q), q = pq - p * g.Q, base = plane * HW, step = 1;
        }
        const long long h0 = p * g.sh - g.ph, w0 = q * g.sw - g.pw;
        const long long r0 = h0 < 0 ? -h0 : 0, r1 = h0 + g.R > g.H ? g.H - h0 : g.R;
        const long long s0 = w0 < 0 ? -w0 : 0, s1 = w0 + g.S > g.W ? g.W - w0 : g.S;
        float best = g.max ? -INFINITY : 0.0f;
        long long bi = (h0 + r0) * g.W + w0 + s0;
        for (long long r = r0; r < r1; r++)
            for (long long s = s0; s < s1; s++) {
                const long long pos = (h0 + r) * g.W + w0 + s;
                const float v = cml__ld<DT>(x, base + pos * step);
                if (!g.max) {
                    best += v;
                } else if (v > best || (v != v && best == best)) {
                    best = v;
                    bi = pos;
                }
            }
        cml__st<DT>(y, e, g.max ? best : best * g.inv);
        if (idx) idx[e] = (int64_t)bi;
    }
}

/* The outputs o in [*lo, *hi] whose window [o stride - pad, + k) covers input i (empty when lo > hi). */
static __device__ __forceinline__ void covering(long long i, long long k, long long stride, long long pad,
                                                long long n_out, long long *lo, long long *hi) {
    const long long a = i + pad - k + 1;
    *lo = a <= 0 ? 0 : cml__div(a + stride - 1, stride);
    const long long h = cml__div(i + pad, stride);
    *hi = h < n_out - 1 ? h : n_out - 1;
}

template <int DT>
static __global__ void pool_bwd_kernel(void *dx, const void *dy, const int64_t *idx, pgeom g, cml__index_flag bad) {
    const long long HW = g.H * g.W, total = g.N * g.C * HW, PQ = g.P * g.Q;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long h, w, base, step;
        if (g.cl) { /* dx (n, h, w, c) */
            const long long pix = cml__div(e, g.C), c = e - pix * g.C, n = cml__div(pix, g.H * g.W), hw = pix - n * g.H * g.W;
            h = cml__div(hw, g.W), w = hw - h * g.W, base = n * PQ * g.C + c, step = g.C;
        } else { /* dx (plane, h, w) */
            const long long plane = cml__div(e, g.H * g.W), hw = e - plane * g.H * g.W;
            h = cml__div(hw, g.W), w = hw - h * g.W, base = plane * PQ, step = 1;
        }
        long long p0, p1, q0, q1;
        covering(h, g.R, g.sh, g.ph, g.P, &p0, &p1);
        covering(w, g.S, g.sw, g.pw, g.Q, &q0, &q1);
        const int64_t pos = (int64_t)(h * g.W + w);
        float acc = 0.0f;
        for (long long p = p0; p <= p1; p++)
            for (long long q = q0; q <= q1; q++) {
                const long long o = base + (p * g.Q + q) * step;
                /* rounded multiply, then add (no fused multiply-add): the CPU's arithmetic */
                if (!g.max) acc = __fadd_rn(acc, __fmul_rn(cml__ld<DT>(dy, o), g.inv));
                else {
                    const int64_t at = idx[o];
                    if (at == pos) acc += cml__ld<DT>(dy, o);
                    else if (at < 0 || at >= HW) cml__index_flag_bad(bad, o);
                }
            }
        cml__st<DT>(dx, e, acc);
    }
}

/* ---- launch ---------------------------------------------------------------------------------------------- */

static pgeom make_geom(const cml_pool2d_desc *d, int64_t P, int64_t Q) {
    pgeom g = {d->N, d->C, d->H, d->W, d->R, d->S, P, Q, d->stride_h, d->stride_w, d->pad_h, d->pad_w,
               d->mode == CML_POOL_MAX, d->channels_last, 1.0f / (float)(d->R * d->S)};
    return g;
}

#define LAUNCH_DT(fn, name, KERNEL, dt, total, ...)                                              \
    do {                                                                                         \
        const unsigned grid_ = cml__grid_size(ctx, (total), BLOCK);                               \
        cudaStream_t st_ = cml__stream(ctx);                                                     \
        if ((dt) == CML_F16) KERNEL<CML_F16><<<grid_, BLOCK, 0, st_>>>(__VA_ARGS__);             \
        else if ((dt) == CML_BF16) KERNEL<CML_BF16><<<grid_, BLOCK, 0, st_>>>(__VA_ARGS__);      \
        else KERNEL<CML_F32><<<grid_, BLOCK, 0, st_>>>(__VA_ARGS__);                             \
        return cml__cuda_check_launch(fn, name, cml_dtype_name(dt), (total), grid_, BLOCK);       \
    } while (0)

extern "C" cml_status cml__pool2d_fwd_cuda(cml_ctx *ctx, const cml_pool2d_desc *d, int64_t P, int64_t Q, void *y,
                                           int64_t *indices, const void *x) {
    static const char fn[] = "cml_pool2d_fwd";
    CML_TRY(cml__cuda_check_float_dtype(fn, "dtype", d->dtype));
    CML_TRY(cml__cuda_activate(ctx));
    const pgeom g = make_geom(d, P, Q);
    const long long total = g.N * g.C * P * Q;
    LAUNCH_DT(fn, "pool_fwd_kernel", pool_fwd_kernel, d->dtype, total, y, g.max ? indices : NULL, x, g);
}

static cml_status bwd_launch(cml_ctx *ctx, const char *fn, cml_dtype dt, long long total, void *dx, const void *dy,
                             const int64_t *idx, pgeom g, cml__index_flag bad) {
    LAUNCH_DT(fn, "pool_bwd_kernel", pool_bwd_kernel, dt, total, dx, dy, idx, g, bad);
}

extern "C" cml_status cml__pool2d_bwd_cuda(cml_ctx *ctx, const cml_pool2d_desc *d, int64_t P, int64_t Q, void *dx,
                                           const void *dy, const int64_t *indices) {
    static const char fn[] = "cml_pool2d_bwd";
    CML_TRY(cml__cuda_check_float_dtype(fn, "dtype", d->dtype));
    CML_TRY(cml__cuda_activate(ctx));
    const pgeom g = make_geom(d, P, Q);
    const long long n_out = g.N * g.C * P * Q, HW = g.H * g.W, total = g.N * g.C * HW;
    cml__index_flag bad = {NULL, NULL, 0};
    if (g.max) {
        const cml__index_call call = {fn, "indices", indices, HW, "H*W=", false, 0};
        CML_TRY(cml__index_check_begin(ctx, &call, n_out, &bad));
    }
    CML_TRY(bwd_launch(ctx, fn, d->dtype, total, dx, dy, g.max ? indices : NULL, g, bad));
    return g.max ? cml__index_check_end(ctx, fn) : CML_OK;
}
