/* Output fingerprints of the memory-bound kernels that session 8 changed (norm backward paths,
 * the one-pass chunk kernels' stores), for an old/new comparison on the GPU: the same fixed-seed
 * inputs through both builds must give the same bytes (FNV-1a 64 of every output), since the
 * changes keep every sum's order and the rounding of every element (the hardware pack rounds
 * like the software one; only NaN encodings could differ, and these inputs make none).
 *
 * Not a test of the tree: copied into tests/gpu/ of both builds on the device machine (so that
 * CMake builds it like a GPU test), run there, the two outputs diffed. Each case runs twice and
 * also prints whether the repeat was bitwise identical. */
#include "gpu_row_util.h"

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

typedef struct buf {
    void *d;
    size_t n;
} buf;

static void print_out(const char *what, const char *name, buf b, bool *same) {
    unsigned char *h = malloc(b.n);
    download(h, b.d, b.n);
    printf("%-40s %-6s %016llx%s\n", what, name, (unsigned long long)fnv(h, b.n), same && !*same ? " REPEAT-DIFFERS" : "");
    free(h);
}

/* Runs call twice (outputs poisoned before each), prints the outputs' hashes and whether they repeat. */
#define TWICE(what, outs, nout, call)                                                                         \
    do {                                                                                                      \
        uint64_t first[4];                                                                                    \
        bool same = true;                                                                                     \
        for (int rep = 0; rep < 2; rep++) {                                                                   \
            for (int i = 0; i < (nout); i++) poison(outs[i].d, outs[i].n);                                   \
            CHECK_OK(call);                                                                                   \
            for (int i = 0; i < (nout); i++) {                                                                \
                unsigned char *h = malloc(outs[i].n);                                                         \
                download(h, outs[i].d, outs[i].n);                                                            \
                const uint64_t v = fnv(h, outs[i].n);                                                         \
                free(h);                                                                                      \
                if (rep == 0) first[i] = v;                                                                   \
                else if (first[i] != v) same = false;                                                         \
            }                                                                                                 \
        }                                                                                                     \
        static const char *names_[] = {"out0", "out1", "out2", "out3"};                                       \
        for (int i = 0; i < (nout); i++) print_out((what), names_[i], outs[i], &same);                       \
        CHECK_MSG(same, "%s: a repeat run differs", (what));                                                  \
    } while (0)

static buf dbuf(size_t n) { return (buf){dev_alloc(n), n}; }
static void dfree(buf b) { dev_free(b.d, b.n); }

static buf rand_buf(cml_dtype dt, int64_t n, float lo, float hi) {
    const size_t bytes = (size_t)n * cml_dtype_size(dt);
    void *h = malloc(bytes);
    random_fill(h, dt, n, lo, hi);
    buf b = dbuf(bytes);
    upload(b.d, h, bytes);
    free(h);
    return b;
}

static void norm_case(cml_dtype dt, int64_t rows, int64_t C) {
    char what[96];
    const size_t es = cml_dtype_size(dt), bytes = (size_t)(rows * C) * es, cb = (size_t)C * es;
    buf x = rand_buf(dt, rows * C, -0.5f, 1.5f), dy = rand_buf(dt, rows * C, -1.0f, 1.0f);
    buf g = rand_buf(dt, C, 0.5f, 1.5f), be = rand_buf(dt, C, -0.5f, 0.5f);
    buf y = dbuf(bytes), mean = dbuf((size_t)rows * 4), rstd = dbuf((size_t)rows * 4);
    buf dx = dbuf(bytes), dg = dbuf(cb), db = dbuf(cb);
    {
        buf outs[] = {y, mean, rstd};
        snprintf(what, sizeof what, "ln_fwd %s %lldx%lld", cml_dtype_name(dt), (long long)rows, (long long)C);
        TWICE(what, outs, 3, cml_layernorm_fwd(gctx, y.d, mean.d, rstd.d, x.d, g.d, be.d, rows, C, 1e-5f, dt));
    }
    {
        buf outs[] = {dx, dg, db};
        snprintf(what, sizeof what, "ln_bwd %s %lldx%lld", cml_dtype_name(dt), (long long)rows, (long long)C);
        TWICE(what, outs, 3, cml_layernorm_bwd(gctx, dx.d, dg.d, db.d, dy.d, x.d, g.d, mean.d, rstd.d, rows, C, dt));
        snprintf(what, sizeof what, "ln_bwd-nogamma %s %lldx%lld", cml_dtype_name(dt), (long long)rows, (long long)C);
        TWICE(what, outs, 3, cml_layernorm_bwd(gctx, dx.d, dg.d, db.d, dy.d, x.d, NULL, mean.d, rstd.d, rows, C, dt));
    }
    {
        buf outs[] = {y, rstd};
        snprintf(what, sizeof what, "rms_fwd %s %lldx%lld", cml_dtype_name(dt), (long long)rows, (long long)C);
        TWICE(what, outs, 2, cml_rmsnorm_fwd(gctx, y.d, rstd.d, x.d, g.d, rows, C, 1e-5f, dt));
    }
    {
        buf outs[] = {dx, dg};
        snprintf(what, sizeof what, "rms_bwd %s %lldx%lld", cml_dtype_name(dt), (long long)rows, (long long)C);
        TWICE(what, outs, 2, cml_rmsnorm_bwd(gctx, dx.d, dg.d, dy.d, x.d, g.d, rstd.d, rows, C, dt));
    }
    dfree(x), dfree(dy), dfree(g), dfree(be), dfree(y), dfree(mean), dfree(rstd), dfree(dx), dfree(dg), dfree(db);
}

static void softmax_case(cml_dtype dt, int64_t rows, int64_t n) {
    char what[96];
    const size_t bytes = (size_t)(rows * n) * cml_dtype_size(dt);
    buf x = rand_buf(dt, rows * n, -4.0f, 4.0f), dy = rand_buf(dt, rows * n, -1.0f, 1.0f);
    buf y = dbuf(bytes), dx = dbuf(bytes);
    for (int log = 0; log < 2; log++) {
        buf oy[] = {y}, odx[] = {dx};
        snprintf(what, sizeof what, "softmax%s_fwd %s %lldx%lld", log ? "_log" : "", cml_dtype_name(dt),
                 (long long)rows, (long long)n);
        TWICE(what, oy, 1, cml_softmax_fwd(gctx, y.d, x.d, rows, n, 1, dt, log));
        snprintf(what, sizeof what, "softmax%s_bwd %s %lldx%lld", log ? "_log" : "", cml_dtype_name(dt),
                 (long long)rows, (long long)n);
        TWICE(what, odx, 1, cml_softmax_bwd(gctx, dx.d, dy.d, y.d, rows, n, 1, dt, log));
    }
    /* cross-entropy backward: targets spread over the row (one ignored row) */
    int64_t *ht = malloc((size_t)rows * 8);
    float *hl = malloc((size_t)rows * 4);
    for (int64_t r = 0; r < rows; r++) ht[r] = r == 1 ? -100 : (r * 7919) % n, hl[r] = uniform(0.5f, 1.5f);
    buf t = dbuf((size_t)rows * 8), dl = dbuf((size_t)rows * 4);
    upload(t.d, ht, t.n);
    upload(dl.d, hl, dl.n);
    buf odx[] = {dx};
    snprintf(what, sizeof what, "ce_bwd %s %lldx%lld", cml_dtype_name(dt), (long long)rows, (long long)n);
    TWICE(what, odx, 1, cml_cross_entropy_bwd(gctx, dx.d, dl.d, x.d, t.d, rows, n, dt, -100));
    CHECK_OK(cml_ctx_synchronize(gctx));
    free(ht), free(hl), dfree(t), dfree(dl), dfree(x), dfree(dy), dfree(y), dfree(dx);
}

int main(void) {
    int rc = gpu_test_init(8642);
    if (rc) return rc;
    /* norm paths (bf16 / f32): nbr G = 128/256; nbr G < 32; nbr, C not a power of two; rows kernels G = 512 /
     * 1024; nbl one chunk; nbl KW = 2 with 3 / 8-16 chunks (C not a power of two in the first); nbl 32 chunks */
    static const int64_t norm_shapes[][2] = {{4096, 1024}, {20001, 64}, {777, 1000}, {512, 4096}, {1024, 8192},
                                             {100, 12000}, {128, 32768}, {48, 262144}};
    static const cml_dtype dts[] = {CML_BF16, CML_F32, CML_F16};
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof norm_shapes / sizeof norm_shapes[0]; s++)
            norm_case(dts[d], norm_shapes[s][0], norm_shapes[s][1]);
    /* softmax / CE: register rows and one-pass chunks */
    static const int64_t sm_shapes[][2] = {{512, 4096}, {40, 262144}};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < 2; s++) softmax_case(dts[d], sm_shapes[s][0], sm_shapes[s][1]);
    return th_finish();
}
