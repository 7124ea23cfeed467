/* Variable-length (packed) attention batches on the CPU (cml_attention_desc's
 * cu_seqlens_q/kv): each sequence of a packed batch must give the same bits as
 * that sequence run alone as a B = 1 problem (forward O and lse, backward dQ, dK,
 * dV), with empty sequences (O = 0, lse = -inf where no key; zero gradients),
 * length 1, S_q != S_kv per sequence, causal, GQA, f32 and bf16; inputs outside
 * the sequences (row gaps, rows past the last offset) hold NaN, so a read there
 * would show; outputs and lse entries outside the sequences must keep their
 * poison. The backward against central differences; the same bits on one
 * thread; and the errors for bad descriptors and offsets. */
#include "kernel_test_util.h"

#define ROW_PAD 3   /* elements after each packed row's H x D: must stay untouched */
#define TAIL_ROWS 2 /* rows of the packed buffers past the last sequence */
#define MAX_B 6

typedef struct vl_case {
    int64_t B, H_q, H_kv, D;
    int32_t n_q[MAX_B], n_kv[MAX_B];
    bool causal;
} vl_case;

/* One packed operand: rows of H x D elements plus ROW_PAD, `rows` of them. */
typedef struct vl_buf {
    void *data;
    int64_t rows, H, D, rs; /* rs: row stride */
    size_t bytes;
    cml_dtype dt;
} vl_buf;

static vl_buf vbuf(int64_t rows, int64_t H, int64_t D, cml_dtype dt) {
    vl_buf b = {NULL, rows, H, D, H * D + ROW_PAD, 0, dt};
    b.bytes = (size_t)(rows * b.rs) * cml_dtype_size(dt);
    b.data = kt_malloc(b.bytes);
    th_poison(b.data, b.bytes);
    return b;
}

/* Random values in rows [0, n) (heads x D only); everything else stays NaN. */
static void vfill(vl_buf *b, int64_t n, float lo, float hi, cml_rng *rng) {
    for (int64_t r = 0; r < n; r++)
        for (int64_t e = 0; e < b->H * b->D; e++)
            cml_dtype_store(b->data, b->dt, r * b->rs + e, lo + (hi - lo) * cml_rng_uniform(rng));
}

static char *elem(const vl_buf *b, int64_t row) { return (char *)b->data + (size_t)(row * b->rs) * cml_dtype_size(b->dt); }

typedef struct vl_run {
    cml_attention_desc d;
    int32_t cu_q[MAX_B + 1], cu_kv[MAX_B + 1];
    vl_buf q, k, v, o, dout, dq, dk, dv;
    float *lse;
    size_t lse_bytes;
} vl_run;

static void vl_setup(vl_run *r, const vl_case *c, cml_dtype dt, cml_rng *rng) {
    int64_t smax_q = 1, smax_kv = 1;
    r->cu_q[0] = r->cu_kv[0] = 0;
    for (int64_t b = 0; b < c->B; b++) {
        r->cu_q[b + 1] = r->cu_q[b] + c->n_q[b];
        r->cu_kv[b + 1] = r->cu_kv[b] + c->n_kv[b];
        smax_q = c->n_q[b] > smax_q ? c->n_q[b] : smax_q;
        smax_kv = c->n_kv[b] > smax_kv ? c->n_kv[b] : smax_kv;
    }
    const int64_t tq = r->cu_q[c->B] + TAIL_ROWS, tkv = r->cu_kv[c->B] + TAIL_ROWS;
    /* S_q one above the longest sequence: the bound need not be reached */
    r->d = cml_attention_desc_bshd(c->B, smax_q + 1, smax_kv, c->H_q, c->H_kv, c->D, c->causal, dt);
    r->q = vbuf(tq, c->H_q, c->D, dt), r->o = vbuf(tq, c->H_q, c->D, dt), r->dout = vbuf(tq, c->H_q, c->D, dt);
    r->dq = vbuf(tq, c->H_q, c->D, dt);
    r->k = vbuf(tkv, c->H_kv, c->D, dt), r->v = vbuf(tkv, c->H_kv, c->D, dt);
    r->dk = vbuf(tkv, c->H_kv, c->D, dt), r->dv = vbuf(tkv, c->H_kv, c->D, dt);
    const int64_t qst[3] = {0, r->q.rs, c->D}, kst[3] = {0, r->k.rs, c->D}; /* packed: no batch stride */
    memcpy(r->d.q_stride, qst, sizeof qst), memcpy(r->d.o_stride, qst, sizeof qst);
    memcpy(r->d.k_stride, kst, sizeof kst), memcpy(r->d.v_stride, kst, sizeof kst);
    r->d.cu_seqlens_q = r->cu_q, r->d.cu_seqlens_kv = r->cu_kv;
    r->d.total_q = tq, r->d.total_kv = tkv;
    r->lse_bytes = (size_t)(c->B * c->H_q * r->d.S_q) * sizeof(float);
    r->lse = kt_malloc(r->lse_bytes);
    th_poison(r->lse, r->lse_bytes);
    vfill(&r->q, r->cu_q[c->B], -2, 2, rng);
    vfill(&r->dout, r->cu_q[c->B], -1, 1, rng);
    vfill(&r->k, r->cu_kv[c->B], -2, 2, rng);
    vfill(&r->v, r->cu_kv[c->B], -1, 1, rng);
}

static void vl_free(vl_run *r) {
    vl_buf *bs[8] = {&r->q, &r->k, &r->v, &r->o, &r->dout, &r->dq, &r->dk, &r->dv};
    for (int i = 0; i < 8; i++) free(bs[i]->data);
    free(r->lse);
}

static cml_status vl_fwd(vl_run *r, float *lse) {
    return cml_attention_fwd(kt_ctx(), &r->d, r->o.data, lse, r->q.data, r->k.data, r->v.data);
}

static cml_status vl_bwd(vl_run *r) {
    return cml_attention_bwd(kt_ctx(), &r->d, r->dq.data, r->dk.data, r->dv.data, r->dout.data, r->q.data,
                             r->k.data, r->v.data, r->o.data, r->lse);
}

/* Every byte of b outside rows [0, n) x (H x D) still 0xFF. */
static bool untouched_outside(const vl_buf *b, int64_t n) {
    const size_t es = cml_dtype_size(b->dt);
    const unsigned char *p = b->data;
    for (int64_t r = 0; r < b->rows; r++)
        for (int64_t e = r < n ? b->H * b->D : 0; e < b->rs; e++)
            for (size_t k = 0; k < es; k++)
                if (p[(size_t)(r * b->rs + e) * es + k] != 0xFF) return false;
    return true;
}

/* n rows of H x D elements at a and b, bitwise equal. */
static bool rows_equal(const vl_buf *x, int64_t row_x, const vl_buf *y, int64_t row_y, int64_t n) {
    const size_t nb = (size_t)(x->H * x->D) * cml_dtype_size(x->dt);
    for (int64_t r = 0; r < n; r++)
        if (memcmp(elem(x, row_x + r), elem(y, row_y + r), nb) != 0) return false;
    return true;
}

static bool rows_zero(const vl_buf *x, int64_t row, int64_t n) {
    for (int64_t r = 0; r < n; r++)
        for (int64_t e = 0; e < x->H * x->D; e++)
            if (cml_dtype_load(x->data, x->dt, (row + r) * x->rs + e) != 0.0f) return false;
    return true;
}

/* Sequence b alone as B = 1, on copies of its rows: O, lse, dQ, dK, dV must equal the packed run's bits. */
static void check_sequence(const vl_run *r, int64_t b, const char *what) {
    const cml_attention_desc *d = &r->d;
    const int64_t nq = r->cu_q[b + 1] - r->cu_q[b], nkv = r->cu_kv[b + 1] - r->cu_kv[b];
    const int64_t q0 = r->cu_q[b], kv0 = r->cu_kv[b], Hq = d->H_q;
    if (nq == 0) { /* no query: the keys get no gradient */
        CHECK_MSG(rows_zero(&r->dk, kv0, nkv) && rows_zero(&r->dv, kv0, nkv), "%s seq %lld: dK, dV not 0", what,
                  (long long)b);
        return;
    }
    if (nkv == 0) { /* no key: O = 0, lse = -inf, dQ = 0 */
        CHECK_MSG(rows_zero(&r->o, q0, nq) && rows_zero(&r->dq, q0, nq), "%s seq %lld: O, dQ not 0", what,
                  (long long)b);
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < nq; i++) {
                float l = r->lse[(b * Hq + h) * d->S_q + i];
                CHECK_MSG(isinf(l) && l < 0, "%s seq %lld: lse %g, want -inf", what, (long long)b, l);
            }
        return;
    }
    cml_attention_desc one = cml_attention_desc_bshd(1, nq, nkv, Hq, d->H_kv, d->D, d->causal, d->dtype);
    memcpy(one.q_stride, d->q_stride, sizeof one.q_stride);
    memcpy(one.k_stride, d->k_stride, sizeof one.k_stride);
    memcpy(one.v_stride, d->v_stride, sizeof one.v_stride);
    memcpy(one.o_stride, d->o_stride, sizeof one.o_stride);
    vl_buf o = vbuf(nq, Hq, d->D, d->dtype), dq = vbuf(nq, Hq, d->D, d->dtype);
    vl_buf dk = vbuf(nkv, d->H_kv, d->D, d->dtype), dv = vbuf(nkv, d->H_kv, d->D, d->dtype);
    float *lse = kt_malloc((size_t)(Hq * nq) * sizeof(float));
    CHECK_OK(cml_attention_fwd(kt_ctx(), &one, o.data, lse, elem(&r->q, q0), elem(&r->k, kv0), elem(&r->v, kv0)));
    CHECK_OK(cml_attention_bwd(kt_ctx(), &one, dq.data, dk.data, dv.data, elem(&r->dout, q0), elem(&r->q, q0),
                               elem(&r->k, kv0), elem(&r->v, kv0), o.data, lse));
    CHECK_MSG(rows_equal(&r->o, q0, &o, 0, nq), "%s seq %lld: O differs from the B = 1 run", what, (long long)b);
    bool lse_same = true;
    for (int64_t h = 0; h < Hq; h++)
        lse_same &= memcmp(&r->lse[(b * Hq + h) * d->S_q], &lse[h * nq], (size_t)nq * sizeof(float)) == 0;
    CHECK_MSG(lse_same, "%s seq %lld: lse differs from the B = 1 run", what, (long long)b);
    CHECK_MSG(rows_equal(&r->dq, q0, &dq, 0, nq), "%s seq %lld: dQ differs", what, (long long)b);
    CHECK_MSG(rows_equal(&r->dk, kv0, &dk, 0, nkv), "%s seq %lld: dK differs", what, (long long)b);
    CHECK_MSG(rows_equal(&r->dv, kv0, &dv, 0, nkv), "%s seq %lld: dV differs", what, (long long)b);
    free(o.data), free(dq.data), free(dk.data), free(dv.data), free(lse);
}

static void run_case(const vl_case *c, cml_dtype dt, cml_rng *rng) {
    vl_run r;
    vl_setup(&r, c, dt, rng);
    char what[96];
    snprintf(what, sizeof what, "B=%lld Hq=%lld Hkv=%lld D=%lld causal=%d %s", (long long)c->B, (long long)c->H_q,
             (long long)c->H_kv, (long long)c->D, c->causal, cml_dtype_name(dt));
    CHECK_OK(vl_fwd(&r, r.lse));
    CHECK_OK(vl_bwd(&r));
    const int64_t tq = r.cu_q[c->B], tkv = r.cu_kv[c->B];
    CHECK_MSG(untouched_outside(&r.o, tq) && untouched_outside(&r.dq, tq), "%s: O or dQ written outside", what);
    CHECK_MSG(untouched_outside(&r.dk, tkv) && untouched_outside(&r.dv, tkv), "%s: dK or dV written outside", what);
    bool lse_ok = true; /* entries past each sequence's length keep their poison */
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H_q; h++)
            for (int64_t i = c->n_q[b]; i < r.d.S_q; i++) {
                uint32_t bits;
                memcpy(&bits, &r.lse[(b * c->H_q + h) * r.d.S_q + i], 4);
                lse_ok &= bits == 0xFFFFFFFFu;
            }
    CHECK_MSG(lse_ok, "%s: an lse entry past its sequence was written", what);
    for (int64_t b = 0; b < c->B; b++) check_sequence(&r, b, what);
    vl_free(&r);
}

static const vl_case CASES[] = {
    {3, 2, 2, 8, {5, 0, 1}, {5, 3, 1}, false},                  /* an empty query sequence, length 1 */
    {3, 2, 2, 8, {5, 0, 1}, {5, 3, 1}, true},
    {4, 4, 2, 16, {7, 3, 0, 20}, {13, 0, 4, 17}, true},         /* no keys: O = 0, lse = -inf */
    {4, 4, 1, 16, {7, 3, 2, 20}, {13, 1, 4, 17}, false},        /* MQA */
    {2, 8, 2, 33, {70, 17}, {40, 90}, true},                    /* across tiles, odd D */
    {5, 2, 1, 64, {1, 1, 40, 0, 33}, {1, 2, 39, 1, 0}, true},
    {6, 3, 3, 5, {1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1}, true},
};
#define NCASES (int)(sizeof CASES / sizeof CASES[0])

static void test_varlen_vs_alone(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 60);
    for (int i = 0; i < NCASES; i++) run_case(&CASES[i], CML_F32, &rng);
    for (int i = 0; i < NCASES; i += 2) run_case(&CASES[i], CML_BF16, &rng);
    run_case(&CASES[3], CML_F16, &rng);
}

/* Every output the same bits on one thread as on all (a case large enough to run in parallel). */
static void test_threads(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 61);
    const vl_case c = {3, 4, 2, 64, {100, 0, 130}, {120, 50, 70}, true};
    vl_run r;
    vl_setup(&r, &c, CML_F32, &rng);
    vl_buf *outs[4] = {&r.o, &r.dq, &r.dk, &r.dv};
    void *first[5];
    const int threads = cml_cpu_threads();
    for (int run = 0; run < 2; run++) {
        cml_set_cpu_threads(run ? 1 : threads);
        for (int i = 0; i < 4; i++) th_poison(outs[i]->data, outs[i]->bytes);
        th_poison(r.lse, r.lse_bytes);
        CHECK_OK(vl_fwd(&r, r.lse));
        CHECK_OK(vl_bwd(&r));
        for (int i = 0; i < 5; i++) {
            const void *p = i < 4 ? outs[i]->data : (const void *)r.lse;
            const size_t nb = i < 4 ? outs[i]->bytes : r.lse_bytes;
            if (run == 0) {
                first[i] = kt_malloc(nb);
                memcpy(first[i], p, nb);
            } else {
                CHECK_MSG(memcmp(first[i], p, nb) == 0, "output %d differs on one thread", i);
                free(first[i]);
            }
        }
    }
    cml_set_cpu_threads(threads);
    vl_free(&r);
}

/* L = sum over the sequences' rows of dO * O, in float64, through the kernel's forward. */
static double loss_of(vl_run *r) {
    CHECK_OK(vl_fwd(r, NULL));
    double L = 0;
    for (int64_t row = 0; row < r->cu_q[r->d.B]; row++)
        for (int64_t e = 0; e < r->o.H * r->o.D; e++)
            L += (double)((const float *)r->o.data)[row * r->o.rs + e] *
                 (double)((const float *)r->dout.data)[row * r->dout.rs + e];
    return L;
}

/* The backward against central differences of the forward, on every input element of every sequence. */
static void test_finite_differences(void) {
    static const vl_case fd[] = {{3, 2, 1, 3, {2, 0, 3}, {3, 2, 1}, true},
                                 {3, 2, 1, 3, {2, 0, 3}, {3, 2, 1}, false},
                                 {2, 1, 1, 4, {4, 1}, {2, 3}, true}};
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 62);
    for (int t = 0; t < (int)(sizeof fd / sizeof fd[0]); t++) {
        vl_run r;
        vl_setup(&r, &fd[t], CML_F32, &rng);
        CHECK_OK(vl_fwd(&r, r.lse));
        CHECK_OK(vl_bwd(&r));
        vl_buf *in[3] = {&r.q, &r.k, &r.v}, *grad[3] = {&r.dq, &r.dk, &r.dv};
        const int64_t rows[3] = {r.cu_q[r.d.B], r.cu_kv[r.d.B], r.cu_kv[r.d.B]};
        const float eps = 1e-2f;
        for (int w = 0; w < 3; w++)
            for (int64_t row = 0; row < rows[w]; row++)
                for (int64_t e = 0; e < in[w]->H * in[w]->D; e++) {
                    const int64_t at = row * in[w]->rs + e;
                    float *p = (float *)in[w]->data + at, keep = *p;
                    *p = keep + eps;
                    double lp = loss_of(&r);
                    *p = keep - eps;
                    double lm = loss_of(&r);
                    *p = keep;
                    double num = (lp - lm) / (2.0 * (double)eps), ana = ((const float *)grad[w]->data)[at];
                    CHECK_MSG(fabs(ana - num) <= 2e-4 + 2e-3 * fabs(num),
                              "case %d input %d row %lld elem %lld: analytic %.6g numeric %.6g", t, w, (long long)row,
                              (long long)e, ana, num);
                }
        vl_free(&r);
    }
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 63);
    const vl_case c = {2, 2, 2, 4, {3, 2}, {2, 4}, true};
    vl_run r;
    vl_setup(&r, &c, CML_F32, &rng);
    CHECK_OK(vl_fwd(&r, r.lse));
    const cml_attention_desc good = r.d;
    void *o = r.o.data, *q = r.q.data, *k = r.k.data, *v = r.v.data;
    float *lse = r.lse;
#define FWD_FAILS(substr) CHECK_STATUS(cml_attention_fwd(ctx, &r.d, o, lse, q, k, v), CML_ERR_INVALID_ARG, substr)
#define BWD_FAILS(substr)                                                                                           \
    CHECK_STATUS(cml_attention_bwd(ctx, &r.d, r.dq.data, r.dk.data, r.dv.data, r.dout.data, q, k, v, o, lse),     \
                 CML_ERR_INVALID_ARG, substr)
    r.d = good, r.d.cu_seqlens_kv = NULL;
    FWD_FAILS("cml_attention_fwd: desc->cu_seqlens_kv is NULL but desc->cu_seqlens_q is set");
    r.d = good, r.d.cu_seqlens_q = NULL;
    BWD_FAILS("cml_attention_bwd: desc->cu_seqlens_q is NULL but desc->cu_seqlens_kv is set");
    r.d = good, r.d.cu_seqlens_q = r.d.cu_seqlens_kv = NULL; /* row counts without offsets */
    FWD_FAILS("desc->total_q=7, desc->total_kv=8 must be 0 without desc->cu_seqlens_q/kv");
    r.d = good, r.d.total_kv = -1;
    FWD_FAILS("desc->total_kv=-1 must be >= 0");
    r.d = good, r.d.k_stride[0] = 8;
    FWD_FAILS("desc->k_stride[0] (batch)=8 must be 0 with desc->cu_seqlens_q/kv");
    r.d = good, r.d.o_stride[1] = 4; /* packed rows of O would overlap */
    FWD_FAILS("makes output elements overlap");
    r.d = good;
    int32_t bad[3];
    memcpy(bad, r.cu_q, sizeof bad), bad[0] = 1, r.d.cu_seqlens_q = bad;
    FWD_FAILS("cml_attention_fwd: desc->cu_seqlens_q[0]=1 must be 0");
    memcpy(bad, r.cu_kv, sizeof bad), bad[1] = 3, bad[2] = 2, r.d = good, r.d.cu_seqlens_kv = bad;
    BWD_FAILS("cml_attention_bwd: desc->cu_seqlens_kv[2]=2 < desc->cu_seqlens_kv[1]=3: offsets must be "
              "non-decreasing");
    r.d = good, r.d.S_q = 2; /* sequence 0 has 3 query rows */
    FWD_FAILS("sequence 0 has 3 rows (desc->cu_seqlens_q[1] - desc->cu_seqlens_q[0]), more than desc->S_q=2");
    r.d = good, r.d.total_kv = 5; /* cu_seqlens_kv[2] = 6 */
    FWD_FAILS("desc->cu_seqlens_kv[2]=6 must be <= desc->total_kv=5");
    r.d = good, r.d.total_q = 5, r.d.total_kv = 6; /* exactly the sequences' rows: fine */
    CHECK_OK(vl_fwd(&r, r.lse));
    r.d = good, r.d.B = 0; /* nothing to do, offsets not read */
    CHECK_OK(vl_fwd(&r, r.lse));
    /* on CUDA the offsets are device memory: they are not read on the host, the call reaches the CUDA path */
    cml_ctx cuda = kt_fake_cuda_ctx_unusable();
    r.d = good, r.d.cu_seqlens_q = bad;
    KT_CHECK_CUDA_DISPATCH(cml_attention_fwd(&cuda, &r.d, o, lse, q, k, v));
    KT_CHECK_CUDA_DISPATCH(
        cml_attention_bwd(&cuda, &r.d, r.dq.data, r.dk.data, r.dv.data, r.dout.data, q, k, v, o, lse));
#undef FWD_FAILS
#undef BWD_FAILS
    vl_free(&r);
}

int main(void) {
    RUN(test_varlen_vs_alone);
    RUN(test_threads);
    RUN(test_finite_differences);
    RUN(test_errors);
    return kt_finish();
}
