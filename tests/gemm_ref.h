/* The GEMM test cases shared by tests/cpu/test_kernels_gemm.c and
 * tests/gpu/test_gpu_gemm.c: a case (shape, options, dtypes), its host
 * buffers filled with fresh random values and a descriptor over them, and the
 * float64 reference computed from the stored (already quantized) inputs:
 *
 *   z = alpha * sa * sb * sum_k op(A)[m,k] op(B)[k,n] + beta * C + bias
 *   D = act(z); aux = z (GELU_TANH_AUX) or D = z * gelu'(aux) (DGELU_TANH)
 *   dbias[b*M + m] = sa * sum_k op(A)[m,k]
 *
 * Every buffer is a separate allocation whose data starts `offset` elements
 * in (offset 1 makes every pointer unaligned), with padded leading dims and
 * gaps between batches, and is poisoned (0xFF bytes: NaN in every float
 * dtype) outside what the reference fills. Header-only: static functions. */
#ifndef CML_TESTS_GEMM_REF_H
#define CML_TESTS_GEMM_REF_H

#include "harness.h"

typedef struct gemm_case {
    cml_op op_a, op_b;
    int64_t M, N, K, batch;
    int64_t ld_pad;           /* added to every leading dim */
    int64_t offset;           /* elements from each allocation's start to its data */
    bool broadcast_a, broadcast_b; /* stride 0 */
    float alpha, beta;
    bool c_aliases_d, bias, dbias;
    cml_bias_axis bias_axis;
    cml_epilogue epilogue;
    cml_dtype a_dtype, b_dtype, c_dtype, d_dtype;
    cml_scale_mode a_scale_mode, b_scale_mode;
    cml_gemm_math math;
    bool tma_strides; /* batch gaps of 16 bytes (TMA reads / writes them in place) instead of odd ones */
} gemm_case;

static inline gemm_case gemm_case_make(cml_op op_a, cml_op op_b, int64_t M, int64_t N, int64_t K, int64_t batch) {
    gemm_case g;
    memset(&g, 0, sizeof g);
    g.op_a = op_a;
    g.op_b = op_b;
    g.M = M;
    g.N = N;
    g.K = K;
    g.batch = batch;
    g.alpha = 1.0f;
    g.a_dtype = g.b_dtype = g.c_dtype = g.d_dtype = CML_F32;
    return g;
}

/* "NT M=.. N=.. K=.. b=.. bf16*bf16->f32 epi=2 bias=row ..." for failure messages. */
static inline const char *gemm_case_str(const gemm_case *g, char *buf, size_t n) {
    snprintf(buf, n,
             "%c%c M=%lld N=%lld K=%lld batch=%lld pad=%lld off=%lld bcast=%d%d alpha=%g beta=%g alias=%d "
             "%s*%s(+%s)->%s epi=%d bias=%s scales=%d,%d math=%d dbias=%d",
             g->op_a == CML_OP_N ? 'N' : 'T', g->op_b == CML_OP_N ? 'N' : 'T', (long long)g->M, (long long)g->N,
             (long long)g->K, (long long)g->batch, (long long)g->ld_pad, (long long)g->offset, g->broadcast_a,
             g->broadcast_b, (double)g->alpha, (double)g->beta, g->c_aliases_d, cml_dtype_name(g->a_dtype),
             cml_dtype_name(g->b_dtype), cml_dtype_name(g->c_dtype), cml_dtype_name(g->d_dtype), (int)g->epilogue,
             !g->bias ? "none" : g->bias_axis == CML_BIAS_PER_ROW ? "row" : "col", (int)g->a_scale_mode,
             (int)g->b_scale_mode, (int)g->math, g->dbias);
    return buf;
}

/* One host buffer: storage of `elems` elements after `offset`, data at storage + offset. */
typedef struct gemm_buf {
    void *storage, *data;
    cml_dtype dtype;
    int64_t elems;  /* from data on */
    size_t bytes;   /* of the whole storage (offset included) */
} gemm_buf;

static inline gemm_buf gemm_buf_alloc(int64_t elems, int64_t offset, cml_dtype dt) {
    gemm_buf b;
    size_t es = cml_dtype_size(dt);
    b.dtype = dt;
    b.elems = elems;
    b.bytes = (size_t)(elems + offset) * es;
    b.storage = malloc(b.bytes ? b.bytes : 1);
    if (!b.storage) {
        fprintf(stderr, "out of memory (%zu bytes)\n", b.bytes);
        exit(1);
    }
    th_poison(b.storage, b.bytes);
    b.data = (char *)b.storage + (size_t)offset * es;
    return b;
}

static inline void gemm_buf_fill(gemm_buf *b, float lo, float hi, cml_rng *rng) {
    for (int64_t i = 0; i < b->elems; i++) cml_dtype_store(b->data, b->dtype, i, lo + (hi - lo) * cml_rng_uniform(rng));
}

static inline double gemm_buf_get(const gemm_buf *b, int64_t i) { return (double)cml_dtype_load(b->data, b->dtype, i); }

static inline void gemm_buf_free(gemm_buf *b) {
    free(b->storage);
    b->storage = b->data = NULL;
}

/* A case's inputs and outputs on the host and a descriptor whose pointers
 * (bias, scales, aux, dbias) point at them. D holds C when c_aliases_d. */
typedef struct gemm_data {
    gemm_case g;
    cml_gemm_desc desc;
    gemm_buf A, B, C, D, bias, aux, a_scale, b_scale, dbias;
} gemm_data;

static inline void gemm_data_make(gemm_data *x, const gemm_case *g, cml_rng *rng) {
    memset(x, 0, sizeof *x);
    x->g = *g;
    const int64_t M = g->M, N = g->N, K = g->K, Bt = g->batch;
    cml_gemm_desc d = cml_gemm_desc_init(g->op_a, g->op_b, M, N, K, Bt, g->a_dtype, g->d_dtype);
    d.b_dtype = g->b_dtype;
    d.c_dtype = g->c_aliases_d ? g->d_dtype : g->c_dtype;
    int64_t a_rows = g->op_a == CML_OP_N ? M : K, b_rows = g->op_b == CML_OP_N ? K : N;
    d.lda += g->ld_pad;
    d.ldb += g->ld_pad;
    d.ldc += g->ld_pad;
    d.ldd += g->ld_pad;
    d.ldaux += g->ld_pad;
    const int64_t ga = g->tma_strides ? 16 / (int64_t)cml_dtype_size(g->a_dtype) : 5; /* gaps between batches too */
    const int64_t gb = g->tma_strides ? 16 / (int64_t)cml_dtype_size(g->b_dtype) : 3;
    const int64_t gd = g->tma_strides ? 16 / (int64_t)cml_dtype_size(g->d_dtype) : 2;
    d.stride_a = g->broadcast_a ? 0 : a_rows * d.lda + ga;
    d.stride_b = g->broadcast_b ? 0 : b_rows * d.ldb + gb;
    d.stride_c = M * d.ldc + 1;
    d.stride_d = M * d.ldd + gd;
    d.stride_aux = M * d.ldaux + 4;
    if (g->c_aliases_d) {
        d.ldc = d.ldd;
        d.stride_c = d.stride_d;
    }
    d.alpha = g->alpha;
    d.beta = g->beta;
    d.epilogue = g->epilogue;
    d.bias_axis = g->bias_axis;
    d.math = g->math;
    d.a_scale_mode = g->a_scale_mode;
    d.b_scale_mode = g->b_scale_mode;
    /* storage covers the last batch's last row exactly: reads past it would be out of bounds */
    int64_t na = (g->broadcast_a ? 0 : (Bt - 1) * d.stride_a) + (a_rows > 0 ? (a_rows - 1) * d.lda + (g->op_a == CML_OP_N ? K : M) : 0);
    int64_t nb = (g->broadcast_b ? 0 : (Bt - 1) * d.stride_b) + (b_rows > 0 ? (b_rows - 1) * d.ldb + (g->op_b == CML_OP_N ? N : K) : 0);
    int64_t nc = (Bt - 1) * d.stride_c + (M - 1) * d.ldc + N, nd = (Bt - 1) * d.stride_d + (M - 1) * d.ldd + N;
    int64_t naux = (Bt - 1) * d.stride_aux + (M - 1) * d.ldaux + N;
    x->A = gemm_buf_alloc(na, g->offset, g->a_dtype);
    x->B = gemm_buf_alloc(nb, g->offset, g->b_dtype);
    x->C = gemm_buf_alloc(nc, g->offset, d.c_dtype);
    x->D = gemm_buf_alloc(nd, g->offset, g->d_dtype);
    x->bias = gemm_buf_alloc(g->bias_axis == CML_BIAS_PER_ROW ? M : N, g->offset, g->d_dtype);
    x->aux = gemm_buf_alloc(naux, g->offset, g->d_dtype);
    x->a_scale = gemm_buf_alloc(g->a_scale_mode == CML_SCALE_VECTOR ? M : 1, g->offset, CML_F32);
    x->b_scale = gemm_buf_alloc(g->b_scale_mode == CML_SCALE_VECTOR ? N : 1, g->offset, CML_F32);
    x->dbias = gemm_buf_alloc(Bt * M, g->offset, g->d_dtype);
    gemm_buf_fill(&x->A, -1, 1, rng);
    gemm_buf_fill(&x->B, -1, 1, rng);
    gemm_buf_fill(&x->C, -1, 1, rng);
    gemm_buf_fill(&x->bias, -1, 1, rng);
    gemm_buf_fill(&x->a_scale, 0.5f, 2, rng);
    gemm_buf_fill(&x->b_scale, 0.5f, 2, rng);
    if (g->epilogue == CML_EPILOGUE_DGELU_TANH) gemm_buf_fill(&x->aux, -3, 3, rng); /* saved pre-activations */
    if (g->c_aliases_d) gemm_buf_fill(&x->D, -1, 1, rng);                       /* D holds C */
    d.bias = g->bias ? x->bias.data : NULL;
    d.a_scale = g->a_scale_mode != CML_SCALE_NONE ? (const float *)x->a_scale.data : NULL;
    d.b_scale = g->b_scale_mode != CML_SCALE_NONE ? (const float *)x->b_scale.data : NULL;
    bool uses_aux = g->epilogue == CML_EPILOGUE_GELU_TANH_AUX || g->epilogue == CML_EPILOGUE_DGELU_TANH;
    d.aux = uses_aux ? x->aux.data : NULL;
    d.dbias = g->dbias ? x->dbias.data : NULL;
    x->desc = d;
}

/* The C argument of cml_gemm for this case (host pointers; NULL when beta is 0). */
static inline const void *gemm_data_c(const gemm_data *x) {
    return x->g.beta == 0.0f ? NULL : x->g.c_aliases_d ? x->D.data : x->C.data;
}

static inline void gemm_data_free(gemm_data *x) {
    gemm_buf *bufs[] = {&x->A, &x->B, &x->C, &x->D, &x->bias, &x->aux, &x->a_scale, &x->b_scale, &x->dbias};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gemm_buf_free(bufs[i]);
}

static inline double gemm_ref_gelu(double v) {
    return 0.5 * v * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
}

static inline double gemm_ref_dgelu(double u) {
    const double k0 = sqrt(2 / 3.14159265358979323846), k1 = 0.044715;
    double t = tanh(k0 * (u + k1 * u * u * u));
    return 0.5 * (1 + t) + 0.5 * u * (1 - t * t) * k0 * (1 + 3 * k1 * u * u);
}

/* tf32 with round to nearest, ties away from zero (what cvt.rna.tf32.f32 does). */
static inline double gemm_ref_tf32(double v) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7F800000u) != 0x7F800000u) u = (u + 0x1000u) & 0xFFFFE000u;
    memcpy(&f, &u, 4);
    return f;
}

/* Packed float64 references, read from x's buffers as they are before the GEMM
 * (call it before cml_gemm when C aliases D): ref_d (batch*M*N) always;
 * ref_aux (batch*M*N) for GELU_TANH_AUX, ref_dbias (batch*M) when dbias (NULL
 * otherwise). Only rows m with m % row_step == 0 or m == M-1 are computed
 * (row_step 1: all); the others are left as they are. tf32_inputs rounds
 * both inputs to tf32 first, as CML_GEMM_MATH_TF32 does. */
static inline void gemm_reference(const gemm_data *x, int64_t row_step, bool tf32_inputs, double *ref_d,
                                  double *ref_aux, double *ref_dbias) {
    const gemm_case *g = &x->g;
    const cml_gemm_desc *d = &x->desc;
    const int64_t M = g->M, N = g->N, K = g->K;
    const gemm_buf *c_src = g->c_aliases_d ? &x->D : &x->C;
    double *arow = malloc(sizeof(double) * (size_t)(K > 0 ? K : 1));
    double *bt = malloc(sizeof(double) * (size_t)(K > 0 ? K * N : 1)); /* op(B) transposed: N x K */
    if (!arow || !bt) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t b = 0; b < g->batch; b++) {
        const int64_t a0 = b * d->stride_a, b0 = b * d->stride_b;
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) {
                double v = gemm_buf_get(&x->B, b0 + (g->op_b == CML_OP_N ? k * d->ldb + n : n * d->ldb + k));
                bt[n * K + k] = tf32_inputs ? gemm_ref_tf32(v) : v;
            }
        for (int64_t m = 0; m < M; m++) {
            if (m % row_step != 0 && m != M - 1) continue;
            double asum = 0;
            for (int64_t k = 0; k < K; k++) {
                double v = gemm_buf_get(&x->A, a0 + (g->op_a == CML_OP_N ? m * d->lda + k : k * d->lda + m));
                asum += v;
                arow[k] = tf32_inputs ? gemm_ref_tf32(v) : v;
            }
            double sa = g->a_scale_mode == CML_SCALE_TENSOR ? gemm_buf_get(&x->a_scale, 0)
                        : g->a_scale_mode == CML_SCALE_VECTOR ? gemm_buf_get(&x->a_scale, m)
                                                              : 1.0;
            if (ref_dbias) ref_dbias[b * M + m] = sa * asum;
            for (int64_t n = 0; n < N; n++) {
                double acc = 0;
                const double *bk = bt + n * K;
                for (int64_t k = 0; k < K; k++) acc += arow[k] * bk[k];
                double sb = g->b_scale_mode == CML_SCALE_TENSOR ? gemm_buf_get(&x->b_scale, 0)
                            : g->b_scale_mode == CML_SCALE_VECTOR ? gemm_buf_get(&x->b_scale, n)
                                                                  : 1.0;
                double z = (double)g->alpha * sa * sb * acc;
                if (g->beta != 0) z += (double)g->beta * gemm_buf_get(c_src, b * d->stride_c + m * d->ldc + n);
                if (g->bias) z += gemm_buf_get(&x->bias, g->bias_axis == CML_BIAS_PER_ROW ? m : n);
                double out = z;
                switch (g->epilogue) {
                case CML_EPILOGUE_RELU: out = z > 0 ? z : 0; break;
                case CML_EPILOGUE_GELU_TANH: out = gemm_ref_gelu(z); break;
                case CML_EPILOGUE_GELU_TANH_AUX:
                    out = gemm_ref_gelu(z);
                    if (ref_aux) ref_aux[(b * M + m) * N + n] = z;
                    break;
                case CML_EPILOGUE_DGELU_TANH:
                    out = z * gemm_ref_dgelu(gemm_buf_get(&x->aux, b * d->stride_aux + m * d->ldaux + n));
                    break;
                default: break;
                }
                ref_d[(b * M + m) * N + n] = out;
            }
        }
    }
    free(arow);
    free(bt);
}

/* Packs the batch x M x N elements of an output laid out like D (ld, batch stride) as floats. */
static inline void gemm_unpack(float *out, const void *base, cml_dtype dt, int64_t batch, int64_t M, int64_t N,
                               int64_t ld, int64_t stride) {
    for (int64_t b = 0; b < batch; b++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++)
                out[(b * M + m) * N + n] = cml_dtype_load(base, dt, b * stride + m * ld + n);
}

/* Norm-wise relative error over the rows the reference computed (see gemm_reference); NaN -> inf. */
static inline double gemm_rel_error_rows(const float *out, const double *ref, int64_t batch, int64_t M, int64_t N,
                                         int64_t row_step) {
    double num = 0, den = 0;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t m = 0; m < M; m++) {
            if (m % row_step != 0 && m != M - 1) continue;
            for (int64_t n = 0; n < N; n++) {
                int64_t i = (b * M + m) * N + n;
                if (isnan(out[i]) || isnan(ref[i]) || isinf(out[i])) return INFINITY;
                double e = (double)out[i] - ref[i];
                num += e * e;
                den += ref[i] * ref[i];
            }
        }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The norm-wise bound for an output stored in dt from inputs in in_dt (and math). */
static inline double gemm_tol(cml_dtype out_dt, cml_dtype in_dt, cml_gemm_math math, bool tf32_in_ref) {
    if (out_dt == CML_F16 || out_dt == CML_BF16) return 1e-2;
    if (math == CML_GEMM_MATH_TF32 && !tf32_in_ref) return 1e-3;
    (void)in_dt; /* narrow inputs are exact in the reference: f32 output error is f32 summation */
    return 1e-5;
}

#endif
