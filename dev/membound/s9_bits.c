/* Output fingerprints of the kernels that session 9 changed (cross-entropy forward on packed words,
 * the scaled fp8 conversion and its amax, the last-block merge of split reductions), for an
 * old/new comparison on the GPU: the same fixed-seed inputs through both builds must give the
 * same bytes (FNV-1a 64 of every output), since the changes keep every sum's order and every
 * element's arithmetic (a maximum does not depend on its order).
 *
 * Not a test of the tree: copied into tests/gpu/ of both builds on the device machine (so that
 * CMake builds it like a GPU test), run there, the two outputs diffed. Each case runs twice and
 * also prints whether the repeat was bitwise identical. */
#include <math.h>

#include "gpu_row_util.h"

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Runs call twice (outputs poisoned before each), prints the outputs' hashes and whether they repeat. */
static void twice(const char *what, void *const *outs, const size_t *sizes, int nout, cml_status (*call)(void *),
                  void *arg) {
    uint64_t first[4] = {0}, second[4] = {0};
    for (int rep = 0; rep < 2; rep++) {
        for (int i = 0; i < nout; i++) poison(outs[i], sizes[i]);
        CHECK_OK(call(arg));
        CHECK_OK(cml_ctx_synchronize(gctx));
        for (int i = 0; i < nout; i++) {
            unsigned char *h = malloc(sizes[i]);
            download(h, outs[i], sizes[i]);
            (rep ? second : first)[i] = fnv(h, sizes[i]);
            free(h);
        }
    }
    bool same = true;
    for (int i = 0; i < nout; i++) {
        same = same && first[i] == second[i];
        printf("%-52s out%d %016llx%s\n", what, i, (unsigned long long)first[i],
               first[i] != second[i] ? " REPEAT-DIFFERS" : "");
    }
    CHECK_MSG(same, "%s: a repeat run differs", what);
}

static void *rand_dev(cml_dtype dt, int64_t n, float lo, float hi, size_t pad) {
    const size_t bytes = (size_t)n * cml_dtype_size(dt);
    unsigned char *h = calloc(bytes + pad, 1);
    random_fill(h + pad, dt, n, lo, hi);
    void *d = dev_alloc(bytes + pad);
    upload(d, h, bytes + pad);
    free(h);
    return d;
}

/* ---- cross-entropy forward ---------------------------------------------------------------------- */

typedef struct ce_args {
    float *loss;
    const void *logits;
    const int64_t *t;
    int64_t rows, n;
    cml_dtype dt;
} ce_args;

static cml_status ce_call(void *p) {
    const ce_args *a = p;
    return cml_cross_entropy_fwd(gctx, a->loss, a->logits, a->t, a->rows, a->n, a->dt, -100);
}

/* Random logits in [-8, 8], with row 0 holding a NaN, row 1 all -inf, row 2 -inf at its target,
 * row 3 ignored, row 4 with half its logits -inf (when there are that many rows). */
static void ce_case(cml_dtype dt, int64_t rows, int64_t n) {
    const size_t es = cml_dtype_size(dt), bytes = (size_t)(rows * n) * es;
    unsigned char *h = malloc(bytes);
    random_fill(h, dt, rows * n, -8.0f, 8.0f);
    int64_t *ht = malloc((size_t)rows * 8);
    for (int64_t r = 0; r < rows; r++) ht[r] = (r * 7919 + 13) % n;
    if (rows > 4) {
        cml_dtype_store(h, dt, 0 * n + (n / 3), NAN);
        for (int64_t j = 0; j < n; j++) cml_dtype_store(h, dt, 1 * n + j, -INFINITY);
        cml_dtype_store(h, dt, 2 * n + ht[2], -INFINITY);
        ht[3] = -100;
        for (int64_t j = 0; j < n; j += 2) cml_dtype_store(h, dt, 4 * n + j, -INFINITY);
    }
    void *dx = dev_alloc(bytes), *dt_ = dev_alloc((size_t)rows * 8), *dl = dev_alloc((size_t)rows * 4);
    upload(dx, h, bytes);
    upload(dt_, ht, (size_t)rows * 8);
    ce_args a = {dl, dx, dt_, rows, n, dt};
    char what[96];
    snprintf(what, sizeof what, "ce_fwd %s %lldx%lld", cml_dtype_name(dt), (long long)rows, (long long)n);
    void *outs[] = {dl};
    size_t sizes[] = {(size_t)rows * 4};
    twice(what, outs, sizes, 1, ce_call, &a);
    dev_free(dx, bytes), dev_free(dt_, (size_t)rows * 8), dev_free(dl, (size_t)rows * 4);
    free(h), free(ht);
}

/* ---- scaled fp8 conversion -------------------------------------------------------------------- */

typedef struct cv_args {
    void *y;
    const void *x;
    cml_dtype yd, xd;
    int64_t n;
    const float *scale;
    float *amax;
} cv_args;

static cml_status cv_call(void *p) {
    const cv_args *a = p;
    return cml_convert_scaled(gctx, a->y, a->yd, a->x, a->xd, a->n, a->scale, a->amax);
}

/* off: both buffers one element off 16-byte alignment (the scalar kernel). nan_at: an element set
 * to NaN (< 0: none). */
static void cv_case(cml_dtype xd, cml_dtype yd, int64_t n, bool off, bool with_amax, int64_t nan_at) {
    const size_t xs = cml_dtype_size(xd), ys = cml_dtype_size(yd);
    const size_t xo = off ? xs : 0, yo = off ? ys : 0;
    const size_t xbytes = (size_t)n * xs + xo, ybytes = (size_t)n * ys + yo;
    unsigned char *h = calloc(xbytes, 1);
    if (xd == CML_F8E4M3 || xd == CML_F8E5M2) {
        for (int64_t i = 0; i < n; i++) h[xo + (size_t)i] = (unsigned char)(cml_rng_u32(&rng) & 0xFF);
    } else {
        for (int64_t i = 0; i < n; i++) {
            const float mag = ldexpf(1.0f + cml_rng_uniform(&rng), (int)(cml_rng_u32(&rng) % 40) - 30);
            cml_dtype_store(h + xo, xd, i, cml_rng_u32(&rng) & 1 ? -mag : mag);
        }
        if (nan_at >= 0 && nan_at < n) cml_dtype_store(h + xo, xd, nan_at, -NAN);
    }
    void *dx = dev_alloc(xbytes), *dy = dev_alloc(ybytes), *ds = dev_alloc(8);
    upload(dx, h, xbytes);
    const float sc[2] = {0.37f, 0.0f};
    upload(ds, sc, 8);
    cv_args a = {(char *)dy + yo, (char *)dx + xo, yd, xd, n, (const float *)ds, with_amax ? (float *)ds + 1 : NULL};
    char what[96];
    snprintf(what, sizeof what, "convert %s->%s n=%lld%s%s%s", cml_dtype_name(xd), cml_dtype_name(yd), (long long)n,
             off ? " off" : "", with_amax ? " amax" : "", nan_at >= 0 ? " nan" : "");
    void *outs[] = {dy, (float *)ds + 1};
    size_t sizes[] = {ybytes, 4};
    twice(what, outs, sizes, with_amax ? 2 : 1, cv_call, &a);
    dev_free(dx, xbytes), dev_free(dy, ybytes), dev_free(ds, 8);
    free(h);
}

/* ---- reductions (the last-block merge of split rows and split columns) ------------------------- */

typedef struct rd_args {
    cml_reduce_op op;
    void *y;
    const void *x;
    cml_dtype yd, xd;
    int64_t outer, n, inner;
} rd_args;

static cml_status rd_call(void *p) {
    const rd_args *a = p;
    return cml_reduce(gctx, a->op, a->y, a->yd, a->x, a->xd, a->outer, a->n, a->inner, 1);
}

static void rd_case(cml_reduce_op op, cml_dtype dt, int64_t outer, int64_t n, int64_t inner) {
    const cml_dtype yd = op == CML_REDUCE_ARGMAX ? CML_I64 : dt;
    void *x = rand_dev(dt, outer * n * inner, -1.0f, 1.0f, 0);
    const size_t ybytes = (size_t)(outer * inner) * cml_dtype_size(yd);
    void *y = dev_alloc(ybytes);
    rd_args a = {op, y, x, yd, dt, outer, n, inner};
    char what[96];
    snprintf(what, sizeof what, "reduce op%d %s %lldx%lldx%lld", (int)op, cml_dtype_name(dt), (long long)outer,
             (long long)n, (long long)inner);
    void *outs[] = {y};
    size_t sizes[] = {ybytes};
    twice(what, outs, sizes, 1, rd_call, &a);
    dev_free(x, (size_t)(outer * n * inner) * cml_dtype_size(dt)), dev_free(y, ybytes);
}

int main(void) {
    int rc = gpu_test_init(97531);
    if (rc) return rc;
    static const cml_dtype wide[3] = {CML_F32, CML_BF16, CML_F16};
    /* CE forward: every group width of the packed-word kernel (G < 32 at run time, 32 .. 512 with
     * 4 words a thread, 512 with 8; bits must not change), the streaming kernel (f32 600x32768,
     * unaligned 100x1001), the split path of aligned rows (40x262144, 256x65536: new bits, the
     * new single-kernel split) and of unaligned rows (20x100003: unchanged) */
    static const int64_t ce_shapes[][2] = {{1000, 64},   {777, 200},   {4096, 1024}, {1024, 2048},
                                           {4096, 4096}, {1024, 8192}, {512, 16384}, {600, 32768},
                                           {513, 4000},  {7, 1000},    {100, 1001},  {40, 262144},
                                           {256, 65536}, {20, 100003}};
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof ce_shapes / sizeof ce_shapes[0]; s++)
            ce_case(wide[d], ce_shapes[s][0], ce_shapes[s][1]);
    /* conversions: both directions, aligned and not, with and without amax, lengths around the
     * 512-element warp groups and past one wave of the grid */
    static const int64_t lens[] = {1, 17, 511, 513, 4097, (1 << 20) + 3, (9 << 20) + 517, 1 << 24};
    static const cml_dtype f8[2] = {CML_F8E4M3, CML_F8E5M2};
    for (int w = 0; w < 3; w++)
        for (int f = 0; f < 2; f++)
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
                cv_case(wide[w], f8[f], lens[l], false, false, -1);
                cv_case(wide[w], f8[f], lens[l], false, true, -1);
                cv_case(wide[w], f8[f], lens[l], false, true, lens[l] / 2);
                cv_case(wide[w], f8[f], lens[l], true, true, -1);
                cv_case(f8[f], wide[w], lens[l], false, false, -1);
                cv_case(f8[f], wide[w], lens[l], false, true, -1);
            }
    /* reductions: rows split in 2 and in more chunks, split columns, flat */
    static const int64_t rd_shapes[][3] = {{256, 262144, 1}, {16, 1 << 20, 1}, {1, 1 << 26, 1}, {1, 200000, 48},
                                           {4, 5000, 300},   {1024, 32768, 1}};
    static const cml_reduce_op ops[] = {CML_REDUCE_SUM, CML_REDUCE_MAX, CML_REDUCE_VAR, CML_REDUCE_ARGMAX};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < sizeof rd_shapes / sizeof rd_shapes[0]; s++)
            for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
                rd_case(ops[o], wide[d], rd_shapes[s][0], rd_shapes[s][1], rd_shapes[s][2]);
    return th_finish();
}
