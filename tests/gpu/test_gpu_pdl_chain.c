/* GPU test of programmatic dependent launch in the memory-bound kernels (src/kernels/cuda/common/
 * launch.cuh, CML_PDL): chains of DEPENDENT calls queued back to back with no wait between them,
 *   copy f32 -> dtype (x), softmax, softmax backward, LayerNorm forward, LayerNorm backward (dgamma,
 *   dbeta), RMSNorm forward, RMSNorm backward (dgamma), cross-entropy forward and backward, a row sum,
 *   copy dtype -> f32 (the gradient), an AdamW step, the scaled e4m3 conversion (+ amax),
 * each call reading what the one before wrote, over rows x C in {1 x 4096, 37 x 1031, 2 x 262144 (the
 * row-sync kernels), 64 x 12288 (the norm backward's clusters), 4096 x 1024 f32 and 1024 x 8192 bf16 (16
 * MiB a buffer)} in f32 and bf16. Every intermediate buffer is poisoned (0xFF: NaN) before each chain, so
 * a kernel that touched memory before its cml__pdl_wait would read poison or race its predecessor's
 * writes. The reference is the chain with PDL off and a cml_ctx_synchronize after every call; the chain
 * with PDL on (repeated, no wait inside it) and with PDL off (no wait) must give every output
 * bitwise equal to it. On an sm_90+ device the PDL-on chains must have launched with the PDL attribute
 * (cml__pdl_launches), the PDL-off ones never. Exits 77 ("skipped") without a GPU. */
#include "gpu_row_util.h"
#ifdef CML_HAVE_CUDA /* the chains' helpers: without CUDA only the skip below is built */
#include "kernels/cuda/cuda_kernels.h" /* cml__pdl_force, cml__pdl_launches */

enum { B_X, B_P, B_DX1, B_Y1, B_MEAN, B_RSTD, B_DX2, B_DG1, B_DB1, B_Y2, B_RSTD2, B_DX3, B_DG2, B_LOSS, B_LSE, B_DL,
       B_SUM, B_G32, B_PARAM, B_M, B_V, B_Y8, B_AMAX, N_BUFS };
static const char *const BUF_NAMES[N_BUFS] = {
    "x", "softmax", "softmax_bwd", "layernorm y", "mean", "rstd", "layernorm dx", "layernorm dgamma",
    "layernorm dbeta", "rmsnorm y", "rmsnorm rstd", "rmsnorm dx", "rmsnorm dgamma", "ce loss", "ce lse pairs",
    "ce dlogits", "sum",
    "grad f32", "adamw param", "adamw m", "adamw v", "e4m3", "amax"};
/* the buffers stored as f32 whatever the chain's dtype (the others: the chain's dtype; e4m3 aside) */
static const bool BUF_F32[N_BUFS] = {[B_MEAN] = true, [B_RSTD] = true, [B_RSTD2] = true, [B_LOSS] = true,
                                     [B_LSE] = true,  [B_G32] = true,  [B_PARAM] = true, [B_M] = true,
                                     [B_V] = true,    [B_AMAX] = true};

typedef struct chain {
    int64_t rows, C;
    cml_dtype dt;
    void *buf[N_BUFS];
    size_t bytes[N_BUFS];
    /* inputs, written once */
    float *src;     /* (rows, C) f32 */
    void *gamma;    /* (C) dt */
    void *beta;     /* (C) dt */
    int64_t *tgt;   /* (rows) */
    float *param0;  /* (rows * C) f32: the AdamW parameters before the step */
    float *scale;   /* 1 f32 */
} chain;

static bool chain_alloc(chain *c, int64_t rows, int64_t C, cml_dtype dt) {
    memset(c, 0, sizeof *c);
    c->rows = rows, c->C = C, c->dt = dt;
    const size_t n = (size_t)(rows * C), es = cml_dtype_size(dt), r4 = (size_t)rows * 4, c_es = (size_t)C * es;
    const size_t sizes[N_BUFS] = {n * es, n * es, n * es, n * es, r4, r4,     n * es, c_es, c_es, n * es, r4, n * es,
                                  c_es,   r4,     2 * r4, n * es, (size_t)rows * es, n * 4, n * 4, n * 4, n * 4, n, 4};
    bool ok = true;
    for (int i = 0; i < N_BUFS; i++) {
        c->bytes[i] = sizes[i];
        ok = ok && (c->buf[i] = dev_alloc(sizes[i])) != NULL;
    }
    ok = ok && (c->src = dev_alloc(n * 4)) && (c->gamma = dev_alloc(c_es)) && (c->beta = dev_alloc(c_es)) &&
         (c->tgt = dev_alloc((size_t)rows * 8)) && (c->param0 = dev_alloc(n * 4)) && (c->scale = dev_alloc(4));
    if (!ok) return false;
    float *h = malloc(n * 4);
    unsigned char *hc = malloc(c_es);
    int64_t *ht = malloc((size_t)rows * 8);
    if (!h || !hc || !ht) {
        free(h), free(hc), free(ht);
        return false;
    }
    random_fill(h, CML_F32, (int64_t)n, -3.0f, 3.0f);
    upload(c->src, h, n * 4);
    random_fill(h, CML_F32, (int64_t)n, -1.0f, 1.0f);
    upload(c->param0, h, n * 4);
    random_fill(hc, dt, C, 0.5f, 1.5f);
    upload(c->gamma, hc, c_es);
    random_fill(hc, dt, C, -0.5f, 0.5f);
    upload(c->beta, hc, c_es);
    for (int64_t r = 0; r < rows; r++) ht[r] = r % 5 == 3 ? -100 : (int64_t)(cml_rng_uniform(&rng) * (float)C) % C;
    upload(c->tgt, ht, (size_t)rows * 8);
    const float s = 64.0f;
    upload(c->scale, &s, 4);
    free(h), free(hc), free(ht);
    return true;
}

static void chain_free(chain *c) {
    const size_t n = (size_t)(c->rows * c->C), c_es = (size_t)c->C * cml_dtype_size(c->dt);
    for (int i = 0; i < N_BUFS; i++) dev_free(c->buf[i], c->bytes[i]);
    dev_free(c->src, n * 4), dev_free(c->gamma, c_es), dev_free(c->beta, c_es);
    dev_free(c->tgt, (size_t)c->rows * 8), dev_free(c->param0, n * 4), dev_free(c->scale, 4);
}

static cml_layout flat(int64_t n) {
    cml_layout l;
    memset(&l, 0, sizeof l);
    l.ndim = 1, l.shape[0] = n, l.stride[0] = 1;
    return l;
}

/* Queues the chain; with sync, waits for the stream after every call. */
static void chain_run(chain *c, bool sync) {
    const int64_t R = c->rows, C = c->C, n = R * C;
    const cml_dtype dt = c->dt;
    void **b = c->buf;
    const cml_layout L = flat(n);
#define STEP(call)                                         \
    do {                                                   \
        CHECK_OK(call);                                    \
        if (sync) CHECK_OK(cml_ctx_synchronize(gctx));     \
    } while (0)
    /* the AdamW state starts from param0 and zeros: plain stream-ordered copies / memsets first */
    CHECK_OK(cml__cuda_memcpy(gctx, b[B_PARAM], c->param0, (size_t)n * 4, false, "param"));
    CHECK_OK(cml__cuda_memset(gctx, b[B_M], 0, (size_t)n * 4));
    CHECK_OK(cml__cuda_memset(gctx, b[B_V], 0, (size_t)n * 4));
    STEP(cml_copy(gctx, b[B_X], &L, dt, c->src, &L, CML_F32));
    STEP(cml_softmax_fwd(gctx, b[B_P], b[B_X], R, C, 1, dt, false));
    STEP(cml_softmax_bwd(gctx, b[B_DX1], b[B_X], b[B_P], R, C, 1, dt, false));
    STEP(cml_layernorm_fwd(gctx, b[B_Y1], b[B_MEAN], b[B_RSTD], b[B_X], c->gamma, c->beta, R, C, 1e-5f, dt));
    STEP(cml_layernorm_bwd(gctx, b[B_DX2], b[B_DG1], b[B_DB1], b[B_DX1], b[B_X], c->gamma, b[B_MEAN], b[B_RSTD], R, C,
                           dt));
    STEP(cml_rmsnorm_fwd(gctx, b[B_Y2], b[B_RSTD2], b[B_Y1], c->gamma, R, C, 1e-5f, dt));
    STEP(cml_rmsnorm_bwd(gctx, b[B_DX3], b[B_DG2], b[B_DX2], b[B_Y1], c->gamma, b[B_RSTD2], R, C, dt));
    STEP(cml_cross_entropy_fwd(gctx, b[B_LOSS], b[B_LSE], b[B_Y2], c->tgt, R, C, dt, -100));
    STEP(cml_cross_entropy_bwd(gctx, b[B_DL], b[B_LOSS], b[B_Y2], b[B_LSE], c->tgt, R, C, dt, -100));
    STEP(cml_reduce(gctx, CML_REDUCE_SUM, b[B_SUM], dt, b[B_DL], dt, R, C, 1, 0));
    STEP(cml_copy(gctx, b[B_G32], &L, CML_F32, b[B_DL], &L, dt));
    STEP(cml_adam_update(gctx, b[B_PARAM], b[B_G32], b[B_M], b[B_V], n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, 1));
    STEP(cml_convert_scaled(gctx, b[B_Y8], CML_F8E4M3, b[B_PARAM], CML_F32, n, c->scale, b[B_AMAX]));
#undef STEP
}

static void chain_poison(chain *c) {
    for (int i = 0; i < N_BUFS; i++) poison(c->buf[i], c->bytes[i]);
}

static void chain_download(chain *c, unsigned char **out) {
    for (int i = 0; i < N_BUFS; i++) download(out[i], c->buf[i], c->bytes[i]);
}

static bool alloc_host(chain *c, unsigned char **out) {
    bool ok = true;
    for (int i = 0; i < N_BUFS; i++) ok = (out[i] = malloc(c->bytes[i])) != NULL && ok;
    return ok;
}

static void free_host(unsigned char **out) {
    for (int i = 0; i < N_BUFS; i++) free(out[i]);
}

/* Every output of the chain just run equals want's bytes. */
static void chain_compare(chain *c, unsigned char **want, unsigned char **got, const char *mode, int rep) {
    chain_download(c, got);
    for (int i = 0; i < N_BUFS; i++)
        CHECK_MSG(memcmp(got[i], want[i], c->bytes[i]) == 0, "%s %lldx%lld %s, chain %d: %s differs from the synced run",
                  cml_dtype_name(c->dt), (long long)c->rows, (long long)c->C, mode, rep, BUF_NAMES[i]);
}

#endif

static void run_case(int64_t rows, int64_t C, cml_dtype dt, int reps) {
#ifdef CML_HAVE_CUDA
    chain c;
    unsigned char *want[N_BUFS] = {0}, *got[N_BUFS] = {0};
    bool ok = chain_alloc(&c, rows, C, dt);
    ok = ok && alloc_host(&c, want) && alloc_host(&c, got);
    CHECK_MSG(ok, "%lldx%lld: allocation failed", (long long)rows, (long long)C);
    if (ok) {
        /* reference: PDL off, a wait after every call */
        cml__pdl_force(0);
        const unsigned long long l0 = cml__pdl_launches();
        chain_poison(&c);
        chain_run(&c, true);
        chain_download(&c, want);
        /* a note (not a failure) when the reference itself has NaN: poison read too early could then hide */
        for (int i = 0; i < N_BUFS; i++) {
            if (i == B_Y8 || i == B_LSE) continue; /* (ignored rows' lse pairs are NaN by definition) */
            const cml_dtype bd = BUF_F32[i] ? CML_F32 : dt;
            const int64_t cnt = (int64_t)(c.bytes[i] / cml_dtype_size(bd));
            int64_t nans = 0;
            for (int64_t k = 0; k < cnt; k++) nans += isnan(cml_dtype_load(want[i], bd, k));
            if (nans)
                printf("note: %s %lldx%lld: the reference's %s has %lld NaN\n", cml_dtype_name(dt), (long long)rows,
                       (long long)C, BUF_NAMES[i], (long long)nans);
        }
        /* PDL off, no waits */
        chain_poison(&c);
        chain_run(&c, false);
        chain_compare(&c, want, got, "PDL off", 0);
        CHECK_MSG(cml__pdl_launches() == l0, "PDL forced off but %llu launches had the attribute",
                  cml__pdl_launches() - l0);
        /* PDL on, no waits, repeated */
        cml__pdl_force(1);
        const unsigned long long l1 = cml__pdl_launches();
        for (int rep = 0; rep < reps; rep++) {
            chain_poison(&c);
            chain_run(&c, false);
            chain_compare(&c, want, got, "PDL on", rep);
        }
        /* 13 calls a chain, each at least one kernel through cml__launch, except f32's two same-dtype copies
         * (cudaMemcpyAsync) and the clustered norm backward (2 calls: it launches plainly; the conversion with
         * amax does too, but only at >= 64 MiB); rows of one column may take other shortcuts: one launch a
         * chain at least */
        const unsigned long long least = (unsigned long long)reps * (C == 1 ? 1 : dt == CML_F32 ? 9 : 11);
        if (cml__cuda_arch(0) >= 90)
            CHECK_MSG(cml__pdl_launches() - l1 >= least, "%s %lldx%lld: only %llu PDL launches in %d chains (want >= %llu)",
                      cml_dtype_name(dt), (long long)rows, (long long)C, cml__pdl_launches() - l1, reps, least);
        else
            CHECK_MSG(cml__pdl_launches() == l1, "PDL launches on a device below sm_90");
        cml__pdl_force(-1);
    }
    free_host(want), free_host(got);
    chain_free(&c);
#else
    (void)rows, (void)C, (void)dt, (void)reps;
#endif
}

static void test_chains_small(void) {
    const int reps = under_sanitizer() ? 2 : 20;
    const int64_t shapes[][2] = {{1, 4096}, {37, 1031}, {3, 1}};
    for (int s = 0; s < 3; s++) {
        run_case(shapes[s][0], shapes[s][1], CML_F32, reps);
        run_case(shapes[s][0], shapes[s][1], CML_BF16, reps);
    }
}

static void test_chains_long_rows(void) {
    if (under_sanitizer()) return;
    run_case(2, 262144, CML_F32, 8);   /* the one-pass row-sync kernels */
    run_case(2, 262144, CML_BF16, 8);
    run_case(64, 12288, CML_BF16, 8);  /* norm backward: 2..16 chunks a row (the clusters) */
    run_case(64, 12288, CML_F32, 8);
}

static void test_chains_16mib(void) {
    if (under_sanitizer()) return;
    run_case(4096, 1024, CML_F32, 5);
    run_case(1024, 8192, CML_BF16, 5);
}

int main(void) {
    int rc = gpu_test_init(9753);
    if (rc) return rc;
    RUN(test_chains_small);
    RUN(test_chains_long_rows);
    RUN(test_chains_16mib);
    return th_finish();
}
