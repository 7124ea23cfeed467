/* Attention forward and backward against float64 references: S = 1,
 * S_q != S_kv, causal with S_q < S_kv and S_q > S_kv (rows that see no key),
 * GQA and MQA, D = 64 and odd D, [B, S, H, D], [B, H, S, D] and padded
 * strides, f32 and bf16; the backward also against finite differences;
 * determinism across runs and thread counts; error paths. */
#include "kernel_test_util.h"

typedef enum { L_BSHD = 0, L_BHSD, L_PADDED, L_COUNT } at_layout;
static const char *const layout_name[L_COUNT] = {"bshd", "bhsd", "padded"};

typedef struct at_case {
    int64_t B, H_q, H_kv, S_q, S_kv, D;
    bool causal;
} at_case;

/* Strides (batch, seq, head) of one operand in the given layout. */
static void make_strides(at_layout lay, int64_t S, int64_t H, int64_t D, int64_t st[3]) {
    if (lay == L_BSHD) {
        st[0] = S * H * D, st[1] = H * D, st[2] = D;
    } else if (lay == L_BHSD) {
        st[0] = H * S * D, st[1] = D, st[2] = S * D;
    } else { /* rows padded by 3 elements, batches by 5 more */
        st[0] = S * (H * D + 3) + 5, st[1] = H * D + 3, st[2] = D;
    }
}

static cml_attention_desc make_desc(at_case c, at_layout lay, cml_dtype dt) {
    cml_attention_desc d = cml_attention_desc_bshd(c.B, c.S_q, c.S_kv, c.H_q, c.H_kv, c.D, c.causal, dt);
    make_strides(lay, c.S_q, c.H_q, c.D, d.q_stride);
    make_strides(lay, c.S_q, c.H_q, c.D, d.o_stride);
    make_strides(lay, c.S_kv, c.H_kv, c.D, d.k_stride);
    make_strides(lay, c.S_kv, c.H_kv, c.D, d.v_stride);
    return d;
}

/* A buffer for one operand: enough elements for the farthest one, poisoned. */
typedef struct at_buf {
    void *data;
    int64_t elems;
    int64_t B, S, H, D;
    const int64_t *stride;
    cml_dtype dt;
} at_buf;

static at_buf buf_alloc(int64_t B, int64_t S, int64_t H, int64_t D, const int64_t *stride, cml_dtype dt) {
    at_buf b = {NULL, (B - 1) * stride[0] + (S - 1) * stride[1] + (H - 1) * stride[2] + D, B, S, H, D, stride, dt};
    b.data = kt_malloc((size_t)b.elems * cml_dtype_size(dt));
    th_poison(b.data, (size_t)b.elems * cml_dtype_size(dt));
    return b;
}

static void buf_fill(at_buf *b, float lo, float hi, cml_rng *rng) {
    for (int64_t i = 0; i < b->elems; i++) cml_dtype_store(b->data, b->dt, i, lo + (hi - lo) * cml_rng_uniform(rng));
}

static int64_t buf_off(const at_buf *b, int64_t bi, int64_t s, int64_t h) {
    return bi * b->stride[0] + s * b->stride[1] + h * b->stride[2];
}

/* The operand's values in logical (B, S, H, D) order, as doubles (caller frees). */
static double *buf_read(const at_buf *b) {
    double *v = kt_malloc((size_t)(b->B * b->S * b->H * b->D) * 8);
    int64_t k = 0;
    for (int64_t bi = 0; bi < b->B; bi++)
        for (int64_t s = 0; s < b->S; s++)
            for (int64_t h = 0; h < b->H; h++)
                for (int64_t c = 0; c < b->D; c++) v[k++] = cml_dtype_load(b->data, b->dt, buf_off(b, bi, s, h) + c);
    return v;
}

static float *to_f32(const double *v, int64_t n) {
    float *f = kt_malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    return f;
}

/* float64 attention and its gradients over logical (B, S, H, D) arrays. dO may be NULL (forward only). */
static void reference(const cml_attention_desc *d, const double *q, const double *k, const double *v,
                      const double *dout, double *o, double *lse, double *dq, double *dk, double *dv) {
    const int64_t D = d->D, G = d->H_q / d->H_kv;
    double *p = kt_malloc((size_t)d->S_kv * 8), *dp = kt_malloc((size_t)d->S_kv * 8);
    if (dout) {
        memset(dk, 0, (size_t)(d->B * d->S_kv * d->H_kv * D) * 8);
        memset(dv, 0, (size_t)(d->B * d->S_kv * d->H_kv * D) * 8);
    }
#define QI(b, s, h) ((((b) * d->S_q + (s)) * d->H_q + (h)) * D)
#define KI(b, s, h) ((((b) * d->S_kv + (s)) * d->H_kv + (h)) * D)
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->H_q; h++)
            for (int64_t i = 0; i < d->S_q; i++) {
                int64_t hk = h / G, n = d->S_kv;
                if (d->causal) n = i + d->S_kv - d->S_q + 1;
                if (n < 0) n = 0;
                if (n > d->S_kv) n = d->S_kv;
                const double *qi = q + QI(b, i, h);
                double *oi = o + QI(b, i, h);
                for (int64_t c = 0; c < D; c++) oi[c] = 0;
                if (dout)
                    for (int64_t c = 0; c < D; c++) dq[QI(b, i, h) + c] = 0;
                lse[(b * d->H_q + h) * d->S_q + i] = -INFINITY;
                if (n == 0) continue;
                double m = -INFINITY, sum = 0;
                for (int64_t j = 0; j < n; j++) {
                    double s = 0;
                    for (int64_t c = 0; c < D; c++) s += qi[c] * k[KI(b, j, hk) + c];
                    p[j] = s * (double)d->scale;
                    m = fmax(m, p[j]);
                }
                for (int64_t j = 0; j < n; j++) sum += exp(p[j] - m);
                for (int64_t j = 0; j < n; j++) {
                    p[j] = exp(p[j] - m) / sum;
                    for (int64_t c = 0; c < D; c++) oi[c] += p[j] * v[KI(b, j, hk) + c];
                }
                lse[(b * d->H_q + h) * d->S_q + i] = m + log(sum);
                if (!dout) continue;
                const double *gi = dout + QI(b, i, h);
                double Di = 0;
                for (int64_t j = 0; j < n; j++) {
                    dp[j] = 0;
                    for (int64_t c = 0; c < D; c++) dp[j] += gi[c] * v[KI(b, j, hk) + c];
                    Di += p[j] * dp[j];
                }
                for (int64_t j = 0; j < n; j++) {
                    double ds = p[j] * (dp[j] - Di) * (double)d->scale;
                    for (int64_t c = 0; c < D; c++) {
                        dq[QI(b, i, h) + c] += ds * k[KI(b, j, hk) + c];
                        dk[KI(b, j, hk) + c] += ds * qi[c];
                        dv[KI(b, j, hk) + c] += p[j] * gi[c];
                    }
                }
            }
#undef QI
#undef KI
    free(p);
    free(dp);
}

typedef struct at_run {
    at_buf q, k, v, o, dout, dq, dk, dv;
    float *lse;
} at_run;

static at_run run_alloc(const cml_attention_desc *d, cml_rng *rng) {
    at_run r;
    r.q = buf_alloc(d->B, d->S_q, d->H_q, d->D, d->q_stride, d->dtype);
    r.k = buf_alloc(d->B, d->S_kv, d->H_kv, d->D, d->k_stride, d->dtype);
    r.v = buf_alloc(d->B, d->S_kv, d->H_kv, d->D, d->v_stride, d->dtype);
    r.o = buf_alloc(d->B, d->S_q, d->H_q, d->D, d->o_stride, d->dtype);
    r.dout = buf_alloc(d->B, d->S_q, d->H_q, d->D, d->o_stride, d->dtype);
    r.dq = buf_alloc(d->B, d->S_q, d->H_q, d->D, d->q_stride, d->dtype);
    r.dk = buf_alloc(d->B, d->S_kv, d->H_kv, d->D, d->k_stride, d->dtype);
    r.dv = buf_alloc(d->B, d->S_kv, d->H_kv, d->D, d->v_stride, d->dtype);
    r.lse = kt_malloc((size_t)(d->B * d->H_q * d->S_q) * 4);
    th_poison(r.lse, (size_t)(d->B * d->H_q * d->S_q) * 4);
    buf_fill(&r.q, -2, 2, rng);
    buf_fill(&r.k, -2, 2, rng);
    buf_fill(&r.v, -1, 1, rng);
    buf_fill(&r.dout, -1, 1, rng);
    return r;
}

static void run_free(at_run *r) {
    at_buf *bs[] = {&r->q, &r->k, &r->v, &r->o, &r->dout, &r->dq, &r->dk, &r->dv};
    for (int i = 0; i < 8; i++) free(bs[i]->data);
    free(r->lse);
}

static void run_case(at_case c, at_layout lay, cml_dtype dt, cml_rng *rng) {
    cml_attention_desc d = make_desc(c, lay, dt);
    at_run r = run_alloc(&d, rng);
    CHECK_OK(cml_attention_fwd(kt_ctx(), &d, r.o.data, r.lse, r.q.data, r.k.data, r.v.data));
    CHECK_OK(cml_attention_bwd(kt_ctx(), &d, r.dq.data, r.dk.data, r.dv.data, r.dout.data, r.q.data, r.k.data,
                               r.v.data, r.o.data, r.lse));
    int64_t nq = c.B * c.S_q * c.H_q * c.D, nk = c.B * c.S_kv * c.H_kv * c.D, nl = c.B * c.H_q * c.S_q;
    double *q = buf_read(&r.q), *k = buf_read(&r.k), *v = buf_read(&r.v), *g = buf_read(&r.dout);
    double *o = kt_malloc((size_t)nq * 8), *lse = kt_malloc((size_t)nl * 8), *dq = kt_malloc((size_t)nq * 8);
    double *dk = kt_malloc((size_t)nk * 8), *dv = kt_malloc((size_t)nk * 8);
    reference(&d, q, k, v, g, o, lse, dq, dk, dv);
    double *oo = buf_read(&r.o), *dqo = buf_read(&r.dq), *dko = buf_read(&r.dk), *dvo = buf_read(&r.dv);
    float *of = to_f32(oo, nq), *dqf = to_f32(dqo, nq), *dkf = to_f32(dko, nk), *dvf = to_f32(dvo, nk);
    float *lsef = kt_malloc((size_t)nl * 4);
    for (int64_t i = 0; i < nl; i++) { /* rows that see no key: lse = -inf exactly */
        if (isinf(lse[i])) CHECK_MSG(isinf(r.lse[i]) && r.lse[i] < 0, "lse[%lld] = %g", (long long)i, r.lse[i]);
        lsef[i] = isinf(lse[i]) ? 0.0f : r.lse[i];
        if (isinf(lse[i])) lse[i] = 0;
    }
    double tol = kt_tol(dt);
    char what[160];
    snprintf(what, sizeof what, "B=%lld Hq=%lld Hkv=%lld Sq=%lld Skv=%lld D=%lld causal=%d %s %s", (long long)c.B,
             (long long)c.H_q, (long long)c.H_kv, (long long)c.S_q, (long long)c.S_kv, (long long)c.D, c.causal,
             layout_name[lay], cml_dtype_name(dt));
    KT_CHECK_CLOSE(of, o, nq, tol, "O %s", what);
    KT_CHECK_CLOSE(lsef, lse, nl, 1e-5, "lse %s", what);
    KT_CHECK_CLOSE(dqf, dq, nq, tol, "dQ %s", what);
    KT_CHECK_CLOSE(dkf, dk, nk, tol, "dK %s", what);
    KT_CHECK_CLOSE(dvf, dv, nk, tol, "dV %s", what);
    double *ptrs[] = {q, k, v, g, o, lse, dq, dk, dv, oo, dqo, dko, dvo};
    for (int i = 0; i < 13; i++) free(ptrs[i]);
    free(of), free(dqf), free(dkf), free(dvf), free(lsef);
    run_free(&r);
}

static const at_case cases[] = {
    {1, 1, 1, 1, 1, 1, false},   {1, 1, 1, 1, 1, 1, true},    {2, 3, 3, 5, 5, 8, false},
    {2, 3, 3, 5, 5, 8, true},    {1, 2, 2, 7, 13, 16, true},  {1, 2, 2, 13, 7, 16, true},
    {1, 2, 2, 13, 7, 16, false}, {2, 4, 1, 9, 9, 64, true},   {2, 8, 2, 17, 33, 64, false},
    {2, 8, 2, 33, 17, 64, true}, {1, 4, 1, 33, 33, 7, true},  {1, 2, 2, 1, 20, 32, true},
    {1, 2, 1, 20, 1, 5, false},  {2, 4, 2, 40, 40, 32, true}, {1, 2, 2, 70, 70, 24, false},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static void test_attention_f32(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 50);
    for (int i = 0; i < NCASES; i++)
        for (int l = 0; l < L_COUNT; l++) run_case(cases[i], (at_layout)l, CML_F32, &rng);
}

static void test_attention_bf16(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 51);
    for (int i = 0; i < NCASES; i += 2) run_case(cases[i], (at_layout)(i % L_COUNT), CML_BF16, &rng);
    run_case(cases[7], L_BSHD, CML_F16, &rng);
}

/* lse may be NULL; O does not change. */
static void test_lse_optional(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 52);
    cml_attention_desc d = make_desc(cases[4], L_BSHD, CML_F32);
    at_run r = run_alloc(&d, &rng);
    at_buf o2 = buf_alloc(d.B, d.S_q, d.H_q, d.D, d.o_stride, d.dtype);
    CHECK_OK(cml_attention_fwd(kt_ctx(), &d, r.o.data, r.lse, r.q.data, r.k.data, r.v.data));
    CHECK_OK(cml_attention_fwd(kt_ctx(), &d, o2.data, NULL, r.q.data, r.k.data, r.v.data));
    CHECK(memcmp(r.o.data, o2.data, (size_t)o2.elems * 4) == 0);
    free(o2.data);
    run_free(&r);
}

/* L = sum(dO * O) in float64, through the kernel's forward. */
static double loss_of(const cml_attention_desc *d, at_run *r) {
    CHECK_OK(cml_attention_fwd(kt_ctx(), d, r->o.data, NULL, r->q.data, r->k.data, r->v.data));
    double *o = buf_read(&r->o), *g = buf_read(&r->dout), L = 0;
    for (int64_t i = 0; i < d->B * d->S_q * d->H_q * d->D; i++) L += o[i] * g[i];
    free(o);
    free(g);
    return L;
}

/* The backward against central differences of the forward. */
static void test_finite_differences(void) {
    static const at_case fd[] = {{1, 2, 1, 3, 4, 3, false}, {1, 2, 1, 3, 4, 3, true}, {2, 4, 2, 5, 3, 2, true},
                                 {1, 1, 1, 4, 4, 5, true}};
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 53);
    for (int t = 0; t < (int)(sizeof fd / sizeof fd[0]); t++) {
        cml_attention_desc d = make_desc(fd[t], t % 2 ? L_BHSD : L_PADDED, CML_F32);
        at_run r = run_alloc(&d, &rng);
        CHECK_OK(cml_attention_fwd(kt_ctx(), &d, r.o.data, r.lse, r.q.data, r.k.data, r.v.data));
        CHECK_OK(cml_attention_bwd(kt_ctx(), &d, r.dq.data, r.dk.data, r.dv.data, r.dout.data, r.q.data, r.k.data,
                                   r.v.data, r.o.data, r.lse));
        at_buf *in[3] = {&r.q, &r.k, &r.v}, *grad[3] = {&r.dq, &r.dk, &r.dv};
        const float eps = 1e-2f;
        for (int w = 0; w < 3; w++) {
            at_buf *x = in[w];
            for (int64_t bi = 0; bi < x->B; bi++)
                for (int64_t s = 0; s < x->S; s++)
                    for (int64_t h = 0; h < x->H; h++)
                        for (int64_t c = 0; c < x->D; c++) {
                            float *p = (float *)x->data + buf_off(x, bi, s, h) + c, keep = *p;
                            *p = keep + eps;
                            double lp = loss_of(&d, &r);
                            *p = keep - eps;
                            double lm = loss_of(&d, &r);
                            *p = keep;
                            double num = (lp - lm) / (2.0 * (double)eps);
                            double ana = ((const float *)grad[w]->data)[buf_off(x, bi, s, h) + c];
                            CHECK_MSG(fabs(ana - num) <= 2e-4 + 2e-3 * fabs(num),
                                      "case %d input %d (%lld,%lld,%lld,%lld): analytic %.6g numeric %.6g", t, w,
                                      (long long)bi, (long long)s, (long long)h, (long long)c, ana, num);
                        }
        }
        run_free(&r);
    }
}

/* Repeated runs and runs on 1 thread give the same bits (whole buffers, padding included). */
static void test_deterministic(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 54);
    at_case c = {2, 4, 2, 100, 120, 32, true};
    cml_attention_desc d = make_desc(c, L_PADDED, CML_F32);
    at_run r = run_alloc(&d, &rng);
    at_buf *outs[4] = {&r.o, &r.dq, &r.dk, &r.dv};
    void *first[4];
    int64_t nl = c.B * c.H_q * c.S_q;
    float *lse0 = kt_malloc((size_t)nl * 4);
    int threads = cml_cpu_threads();
    for (int run = 0; run < 3; run++) {
        cml_set_cpu_threads(run == 2 ? 1 : threads);
        for (int i = 0; i < 4; i++) th_poison(outs[i]->data, (size_t)outs[i]->elems * 4);
        CHECK_OK(cml_attention_fwd(kt_ctx(), &d, r.o.data, r.lse, r.q.data, r.k.data, r.v.data));
        CHECK_OK(cml_attention_bwd(kt_ctx(), &d, r.dq.data, r.dk.data, r.dv.data, r.dout.data, r.q.data, r.k.data,
                                   r.v.data, r.o.data, r.lse));
        for (int i = 0; i < 4; i++) {
            size_t nb = (size_t)outs[i]->elems * 4;
            if (run == 0) {
                first[i] = kt_malloc(nb);
                memcpy(first[i], outs[i]->data, nb);
            } else {
                CHECK_MSG(memcmp(first[i], outs[i]->data, nb) == 0, "output %d differs in run %d", i, run);
            }
        }
        if (run == 0) memcpy(lse0, r.lse, (size_t)nl * 4);
        else CHECK(memcmp(lse0, r.lse, (size_t)nl * 4) == 0);
    }
    cml_set_cpu_threads(threads);
    for (int i = 0; i < 4; i++) free(first[i]);
    free(lse0);
    run_free(&r);
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float q[64] = {0}, k[64] = {0}, v[64] = {0}, o[64], lse[8];
    cml_attention_desc good = cml_attention_desc_bshd(1, 2, 2, 2, 2, 4, true, CML_F32), d;
    CHECK(fabsf(good.scale - 0.5f) < 1e-7f);
    CHECK_OK(cml_attention_fwd(ctx, &good, o, lse, q, k, v));
    d = good, d.H_kv = 3, d.H_q = 4;
    CHECK_STATUS(cml_attention_fwd(ctx, &d, o, lse, q, k, v), CML_ERR_INVALID_ARG,
                 "cml_attention_fwd: desc->H_q=4 must be a multiple of desc->H_kv=3");
    d = good, d.D = 0;
    CHECK_STATUS(cml_attention_fwd(ctx, &d, o, lse, q, k, v), CML_ERR_INVALID_ARG,
                 "cml_attention_fwd: desc->D=0 must be >= 1");
    d = good, d.S_kv = 0;
    CHECK_STATUS(cml_attention_bwd(ctx, &d, o, o, o, o, q, k, v, o, lse), CML_ERR_INVALID_ARG,
                 "cml_attention_bwd: desc->S_kv=0 must be >= 1");
    d = good, d.dtype = CML_I64;
    CHECK_STATUS(cml_attention_fwd(ctx, &d, o, lse, q, k, v), CML_ERR_DTYPE,
                 "cml_attention_fwd: desc->dtype=i64 must be a floating-point dtype");
    d = good, d.k_stride[1] = -8;
    CHECK_STATUS(cml_attention_fwd(ctx, &d, o, lse, q, k, v), CML_ERR_INVALID_ARG,
                 "cml_attention_fwd: desc->k_stride[1] (seq)=-8 must be >= 0");
    d = good, d.o_stride[1] = 2; /* seq rows of O would overlap */
    CHECK_STATUS(cml_attention_fwd(ctx, &d, o, lse, q, k, v), CML_ERR_INVALID_ARG, "o_stride = {16, 2, 4}");
    CHECK_ERROR(CML_ERR_INVALID_ARG, "overlap");
    d = good, d.k_stride[0] = 0; /* K broadcast over the batch: fine for the forward ... */
    CHECK_OK(cml_attention_fwd(ctx, &d, o, lse, q, k, v));
    d.B = 2; /* ... but dK cannot be written through it */
    CHECK_STATUS(cml_attention_bwd(ctx, &d, o, o, o, o, q, k, v, o, lse), CML_ERR_INVALID_ARG,
                 "cml_attention_bwd: desc->k_stride = {0, 8, 4} makes output elements overlap");
    d = good, d.scale = NAN;
    CHECK_STATUS(cml_attention_fwd(ctx, &d, o, lse, q, k, v), CML_ERR_INVALID_ARG,
                 "cml_attention_fwd: desc->scale=nan must be finite");
    CHECK_STATUS(cml_attention_fwd(ctx, &good, o, lse, NULL, k, v), CML_ERR_INVALID_ARG,
                 "cml_attention_fwd: Q must not be NULL");
    CHECK_STATUS(cml_attention_fwd(ctx, NULL, o, lse, q, k, v), CML_ERR_INVALID_ARG,
                 "cml_attention_fwd: desc must not be NULL");
    CHECK_STATUS(cml_attention_bwd(ctx, &good, o, o, o, o, q, k, v, o, NULL), CML_ERR_INVALID_ARG,
                 "cml_attention_bwd: lse must not be NULL");
    d = good, d.B = 3, d.q_stride[0] = INT64_MAX / 2;
    CHECK_STATUS(cml_attention_fwd(ctx, &d, o, lse, q, k, v), CML_ERR_INVALID_ARG, "overflows int64");
    /* the CUDA kernels are tested in tests/gpu; here only that a CUDA context reaches them */
    cml_ctx cuda = kt_fake_cuda_ctx_unusable();
    KT_CHECK_CUDA_DISPATCH(cml_attention_fwd(&cuda, &good, o, lse, q, k, v));
    KT_CHECK_CUDA_DISPATCH(cml_attention_bwd(&cuda, &good, o, o, o, o, q, k, v, o, lse));
}

int main(void) {
    RUN(test_attention_f32);
    RUN(test_attention_bf16);
    RUN(test_lse_optional);
    RUN(test_finite_differences);
    RUN(test_deterministic);
    RUN(test_errors);
    return kt_finish();
}
