/* CPU elementwise math: unary, unary backward and binary ops.
 *
 * Every op is written once as a plain loop over contiguous f32 arrays (which
 * the compiler vectorizes); the strided engine (strided.h) feeds it pieces of
 * the N-d loop, converting other dtypes or strides through small stack
 * buffers and pointing straight at the data when it is contiguous f32.
 * Integer binary arithmetic that is exact in integers runs in int64 instead. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"

#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f
#define INV_SQRT_2PI 0.3989422804014327
#define SQRT_HALF 0.70710678118654752440 /* M_SQRT1_2 is not in strict C11 */

static inline float gelu_erf(float x) {
    /* erf in double: erff loses a few ulps around the origin, where GELU is steep relative to its value. */
    return (float)(0.5 * (double)x * (1.0 + erf((double)x * SQRT_HALF)));
}

static void unary_apply(cml_unary_op op, float p, float *y, const float *x, int64_t n) {
    switch (op) {
    case CML_UNARY_IDENTITY: for (int64_t i = 0; i < n; i++) y[i] = x[i]; break;
    case CML_UNARY_NEG: for (int64_t i = 0; i < n; i++) y[i] = -x[i]; break;
    case CML_UNARY_EXP: for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]); break;
    case CML_UNARY_LOG: for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]); break;
    case CML_UNARY_SQRT: for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]); break;
    case CML_UNARY_TANH: for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]); break;
    case CML_UNARY_SIGMOID: for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i])); break;
    case CML_UNARY_RELU: /* NaN propagates, like torch.relu */
        for (int64_t i = 0; i < n; i++) y[i] = (x[i] > 0.0f || x[i] != x[i]) ? x[i] : 0.0f;
        break;
    case CML_UNARY_GELU_TANH: /* 0.5 (1 + tanh(u)) = sigmoid(2u): one expf is ~5x cheaper than tanhf here */
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            y[i] = v / (1.0f + expf(-2.0f * SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v)));
        }
        break;
    case CML_UNARY_GELU_ERF: for (int64_t i = 0; i < n; i++) y[i] = gelu_erf(x[i]); break;
    case CML_UNARY_ABS: for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]); break;
    case CML_UNARY_SCALE: for (int64_t i = 0; i < n; i++) y[i] = x[i] * p; break;
    case CML_UNARY_ADD_SCALAR: for (int64_t i = 0; i < n; i++) y[i] = x[i] + p; break;
    case CML_UNARY_POW_SCALAR: for (int64_t i = 0; i < n; i++) y[i] = powf(x[i], p); break;
    default: break;
    }
}

/* dx = dy * op'(x). x or y is NULL when the caller did not give it; the
 * public entry point has checked that the one this op needs is present. */
static void unary_bwd_apply(cml_unary_op op, float p, float *dx, const float *dy, const float *x,
                            const float *y, int64_t n) {
    switch (op) {
    case CML_UNARY_IDENTITY:
    case CML_UNARY_ADD_SCALAR: for (int64_t i = 0; i < n; i++) dx[i] = dy[i]; break;
    case CML_UNARY_NEG: for (int64_t i = 0; i < n; i++) dx[i] = -dy[i]; break;
    case CML_UNARY_SCALE: for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * p; break;
    case CML_UNARY_EXP:
        if (y) for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * y[i];
        else for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * expf(x[i]);
        break;
    case CML_UNARY_LOG: for (int64_t i = 0; i < n; i++) dx[i] = dy[i] / x[i]; break;
    case CML_UNARY_SQRT:
        if (y) for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * 0.5f / y[i];
        else for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * 0.5f / sqrtf(x[i]);
        break;
    case CML_UNARY_TANH:
        for (int64_t i = 0; i < n; i++) {
            float t = y ? y[i] : tanhf(x[i]);
            dx[i] = dy[i] * (1.0f - t * t);
        }
        break;
    case CML_UNARY_SIGMOID:
        for (int64_t i = 0; i < n; i++) {
            float s = y ? y[i] : 1.0f / (1.0f + expf(-x[i]));
            dx[i] = dy[i] * s * (1.0f - s);
        }
        break;
    case CML_UNARY_RELU: /* relu'(0) = 0; y > 0 exactly when x > 0 */
        for (int64_t i = 0; i < n; i++) dx[i] = ((x ? x[i] : y[i]) > 0.0f) ? dy[i] : 0.0f;
        break;
    case CML_UNARY_GELU_TANH:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            float s = 1.0f / (1.0f + expf(-2.0f * SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v)));
            float du = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * v * v);
            /* with t = tanh(u) = 2s - 1: 0.5 (1 + t) = s and 1 - t^2 = 4 s (1 - s) */
            dx[i] = dy[i] * (s + 2.0f * v * s * (1.0f - s) * du);
        }
        break;
    case CML_UNARY_GELU_ERF: /* Phi(x) + x phi(x) */
        for (int64_t i = 0; i < n; i++) {
            double v = x[i];
            double d = 0.5 * (1.0 + erf(v * SQRT_HALF)) + v * exp(-0.5 * v * v) * INV_SQRT_2PI;
            dx[i] = (float)(dy[i] * d);
        }
        break;
    case CML_UNARY_ABS: /* abs'(0) = 0 */
        for (int64_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : x[i] < 0.0f ? -dy[i] : 0.0f * dy[i];
        break;
    case CML_UNARY_POW_SCALAR: /* p x^(p-1); d/dx x^0 = 0 everywhere (as in PyTorch) */
        if (p == 0.0f) for (int64_t i = 0; i < n; i++) dx[i] = 0.0f * dy[i];
        else for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * p * powf(x[i], p - 1.0f);
        break;
    default: break;
    }
}

static void binary_apply(cml_binary_op op, float *y, const float *a, const float *b, int64_t n) {
    switch (op) {
    case CML_BINARY_ADD: for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i]; break;
    case CML_BINARY_SUB: for (int64_t i = 0; i < n; i++) y[i] = a[i] - b[i]; break;
    case CML_BINARY_MUL: for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i]; break;
    case CML_BINARY_DIV: for (int64_t i = 0; i < n; i++) y[i] = a[i] / b[i]; break;
    case CML_BINARY_POW: for (int64_t i = 0; i < n; i++) y[i] = powf(a[i], b[i]); break;
    case CML_BINARY_MAX: /* NaN propagates (torch.maximum), unlike fmaxf */
        for (int64_t i = 0; i < n; i++) y[i] = (a[i] > b[i] || a[i] != a[i]) ? a[i] : b[i];
        break;
    case CML_BINARY_MIN:
        for (int64_t i = 0; i < n; i++) y[i] = (a[i] < b[i] || a[i] != a[i]) ? a[i] : b[i];
        break;
    case CML_BINARY_EQ: for (int64_t i = 0; i < n; i++) y[i] = a[i] == b[i] ? 1.0f : 0.0f; break;
    case CML_BINARY_GT: for (int64_t i = 0; i < n; i++) y[i] = a[i] > b[i] ? 1.0f : 0.0f; break;
    default: break;
    }
}

/* Integer ops that are exact in int64 (wrapping like two's complement on overflow). */
static bool binary_is_exact_in_int(cml_binary_op op) {
    return op == CML_BINARY_ADD || op == CML_BINARY_SUB || op == CML_BINARY_MUL || op == CML_BINARY_MAX ||
           op == CML_BINARY_MIN || op == CML_BINARY_EQ || op == CML_BINARY_GT;
}

static void binary_apply_int(cml_binary_op op, int64_t *y, const int64_t *a, const int64_t *b, int64_t n) {
    switch (op) {
    case CML_BINARY_ADD: for (int64_t i = 0; i < n; i++) y[i] = (int64_t)((uint64_t)a[i] + (uint64_t)b[i]); break;
    case CML_BINARY_SUB: for (int64_t i = 0; i < n; i++) y[i] = (int64_t)((uint64_t)a[i] - (uint64_t)b[i]); break;
    case CML_BINARY_MUL: for (int64_t i = 0; i < n; i++) y[i] = (int64_t)((uint64_t)a[i] * (uint64_t)b[i]); break;
    case CML_BINARY_MAX: for (int64_t i = 0; i < n; i++) y[i] = a[i] > b[i] ? a[i] : b[i]; break;
    case CML_BINARY_MIN: for (int64_t i = 0; i < n; i++) y[i] = a[i] < b[i] ? a[i] : b[i]; break;
    case CML_BINARY_EQ: for (int64_t i = 0; i < n; i++) y[i] = a[i] == b[i]; break;
    case CML_BINARY_GT: for (int64_t i = 0; i < n; i++) y[i] = a[i] > b[i]; break;
    default: break;
    }
}

/* ---- unary ------------------------------------------------------------------ */

typedef struct unary_job {
    cml_unary_op op;
    float param;
    void *y;
    const void *x;
    cml_dtype y_dtype, x_dtype;
} unary_job;

static void unary_piece(void *job_ptr, const int64_t *offset, const int64_t *stride, int64_t len) {
    const unary_job *job = job_ptr;
    float xbuf[CML__EW_PIECE], ybuf[CML__EW_PIECE];
    const float *x = cml__f32_view(xbuf, job->x, job->x_dtype, offset[1], stride[1], len);
    bool y_direct = job->y_dtype == CML_F32 && stride[0] == 1;
    float *y = y_direct ? (float *)job->y + offset[0] : ybuf;
    unary_apply(job->op, job->param, y, x, len);
    if (!y_direct) cml__store_f32(job->y, job->y_dtype, offset[0], stride[0], y, len);
}

cml_status cml__unary_cpu(cml_ctx *ctx, cml_unary_op op, float param,
                          void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                          const void *x, const cml_layout *x_layout, cml_dtype x_dtype) {
    const cml_layout *layouts[2] = {y_layout, x_layout};
    cml__ew_iter it;
    cml__ew_iter_init(&it, 2, layouts);
    unary_job job = {op, param, y, x, y_dtype, x_dtype};
    cml__ew_for_each_piece(&it, unary_piece, &job);
    return CML_OK;
}

/* ---- unary backward ------------------------------------------------------------ */

typedef struct unary_bwd_job {
    cml_unary_op op;
    float param;
    void *dx;
    const void *dy, *x, *y;
    cml_dtype dtype;
} unary_bwd_job;

static void unary_bwd_piece(void *job_ptr, const int64_t *offset, const int64_t *stride, int64_t len) {
    const unary_bwd_job *job = job_ptr;
    float dxbuf[CML__EW_PIECE], dybuf[CML__EW_PIECE], xbuf[CML__EW_PIECE], ybuf[CML__EW_PIECE];
    const float *dy = cml__f32_view(dybuf, job->dy, job->dtype, offset[1], 1, len);
    const float *x = job->x ? cml__f32_view(xbuf, job->x, job->dtype, offset[2], 1, len) : NULL;
    const float *y = job->y ? cml__f32_view(ybuf, job->y, job->dtype, offset[3], 1, len) : NULL;
    bool dx_direct = job->dtype == CML_F32;
    float *dx = dx_direct ? (float *)job->dx + offset[0] : dxbuf;
    (void)stride; /* all four buffers are contiguous */
    unary_bwd_apply(job->op, job->param, dx, dy, x, y, len);
    if (!dx_direct) cml__store_f32(job->dx, job->dtype, offset[0], 1, dx, len);
}

cml_status cml__unary_bwd_cpu(cml_ctx *ctx, cml_unary_op op, float param,
                              void *dx, const void *dy, const void *x, const void *y,
                              int64_t n, cml_dtype dtype) {
    cml_layout flat = {1, {n}, {1}};
    const cml_layout *layouts[4] = {&flat, &flat, &flat, &flat};
    cml__ew_iter it;
    cml__ew_iter_init(&it, 4, layouts);
    unary_bwd_job job = {op, param, dx, dy, x, y, dtype};
    cml__ew_for_each_piece(&it, unary_bwd_piece, &job);
    return CML_OK;
}

/* ---- binary --------------------------------------------------------------------- */

typedef struct binary_job {
    cml_binary_op op;
    void *y;
    const void *a, *b;
    cml_dtype y_dtype, a_dtype, b_dtype;
} binary_job;

static void binary_piece(void *job_ptr, const int64_t *offset, const int64_t *stride, int64_t len) {
    const binary_job *job = job_ptr;
    float abuf[CML__EW_PIECE], bbuf[CML__EW_PIECE], ybuf[CML__EW_PIECE];
    const float *a = cml__f32_view(abuf, job->a, job->a_dtype, offset[1], stride[1], len);
    const float *b = cml__f32_view(bbuf, job->b, job->b_dtype, offset[2], stride[2], len);
    bool y_direct = job->y_dtype == CML_F32 && stride[0] == 1;
    float *y = y_direct ? (float *)job->y + offset[0] : ybuf;
    binary_apply(job->op, y, a, b, len);
    if (!y_direct) cml__store_f32(job->y, job->y_dtype, offset[0], stride[0], y, len);
}

static void binary_int_piece(void *job_ptr, const int64_t *offset, const int64_t *stride, int64_t len) {
    const binary_job *job = job_ptr;
    int64_t a[CML__EW_PIECE], b[CML__EW_PIECE], y[CML__EW_PIECE];
    cml__load_i64(a, job->a, job->a_dtype, offset[1], stride[1], len);
    cml__load_i64(b, job->b, job->b_dtype, offset[2], stride[2], len);
    binary_apply_int(job->op, y, a, b, len);
    cml__store_i64(job->y, job->y_dtype, offset[0], stride[0], y, len);
}

cml_status cml__binary_cpu(cml_ctx *ctx, cml_binary_op op,
                           void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                           const void *a, const cml_layout *a_layout, cml_dtype a_dtype,
                           const void *b, const cml_layout *b_layout, cml_dtype b_dtype) {
    const cml_layout *layouts[3] = {y_layout, a_layout, b_layout};
    cml__ew_iter it;
    cml__ew_iter_init(&it, 3, layouts);
    binary_job job = {op, y, a, b, y_dtype, a_dtype, b_dtype};
    bool all_int = cml__dtype_is_int(y_dtype) && cml__dtype_is_int(a_dtype) && cml__dtype_is_int(b_dtype);
    cml__ew_for_each_piece(&it, all_int && binary_is_exact_in_int(op) ? binary_int_piece : binary_piece, &job);
    return CML_OK;
}
