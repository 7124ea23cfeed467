/* Session 11 (helper h11c): fingerprints of the LayerNorm / RMSNorm forward outputs (y, mean, rstd
 * each as its own FNV-1a 64), run twice in ONE binary: with CML_NORM_FWD_CLUSTER=0 (the register-row
 * and one-pass row-sync kernels, as before) and with the defaults (the cluster kernels,
 * norm_fwd_cluster.cuh); the two outputs are diffed by dev/membound/s11_ab.sh. Expected: equal
 * where the cluster keeps the one-pass kernel's chunks (rows over 32768 f32 / 65536 bf16
 * elements, <= 16 chunks), different where it takes half chunks of rows the register-row kernel
 * held (8193..32768 f32, 16385..65536 bf16). Each case runs twice (outputs poisoned before each)
 * and prints REPEAT-DIFFERS when the two runs differ. Built like a GPU test (includes
 * tests/gpu/gpu_row_util.h); not a test of the tree. */
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

static void fwd_case(cml_dtype dt, int64_t rows, int64_t C) {
    char what[96];
    const size_t es = cml_dtype_size(dt), bytes = (size_t)(rows * C) * es;
    buf x = rand_buf(dt, rows * C, -0.5f, 1.5f), g = rand_buf(dt, C, 0.5f, 1.5f), be = rand_buf(dt, C, -0.5f, 0.5f);
    buf y = dbuf(bytes), mean = dbuf((size_t)rows * 4), rstd = dbuf((size_t)rows * 4);
    {
        buf outs[] = {y, mean, rstd};
        snprintf(what, sizeof what, "ln_fwd %s %lldx%lld", cml_dtype_name(dt), (long long)rows, (long long)C);
        TWICE(what, outs, 3, cml_layernorm_fwd(gctx, y.d, mean.d, rstd.d, x.d, g.d, be.d, rows, C, 1e-5f, dt));
        snprintf(what, sizeof what, "ln_fwd-noaffine %s %lldx%lld", cml_dtype_name(dt), (long long)rows, (long long)C);
        TWICE(what, outs, 3, cml_layernorm_fwd(gctx, y.d, mean.d, rstd.d, x.d, NULL, NULL, rows, C, 1e-5f, dt));
    }
    {
        buf outs[] = {y, rstd};
        snprintf(what, sizeof what, "rms_fwd %s %lldx%lld", cml_dtype_name(dt), (long long)rows, (long long)C);
        TWICE(what, outs, 2, cml_rmsnorm_fwd(gctx, y.d, rstd.d, x.d, g.d, rows, C, 1e-5f, dt));
    }
    dfree(x), dfree(g), dfree(be), dfree(y), dfree(mean), dfree(rstd);
}

int main(void) {
    int rc = gpu_test_init(1311);
    if (rc) return rc;
    /* the bench shapes (1024x32768: half chunks, new bits; 256x262144: bf16/f16 16 full chunks, same
     * bits; f32 32 chunks: the one-pass kernel either way), full chunks 5..16 (same bits), half
     * chunks 3..8 with a short last chunk (new bits), 16384x8192 (the register rows either way) */
    static const int64_t shapes[][2] = {{1024, 32768}, {256, 262144}, {61, 65544}, {37, 98312},
                                        {203, 131072}, {1031, 16392}, {77, 24584}, {2048, 8192}};
    static const cml_dtype dts[] = {CML_BF16, CML_F32, CML_F16};
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) fwd_case(dts[d], shapes[s][0], shapes[s][1]);
    return th_finish();
}
