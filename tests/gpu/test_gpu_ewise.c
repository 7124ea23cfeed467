/* GPU tests of the CUDA runtime (contexts, caching allocator, host<->device
 * copies) and the elementwise kernels (copy, fill, unary, binary).
 *
 * Every kernel runs on the GPU and on the CPU (the reference) with the same
 * random inputs and layouts: flat sizes 1, 7, 127, 1025, 4097, a broadcast
 * (3,1,5)+(4,1), transposed inputs and outputs, a view one element off 16-byte
 * alignment, a reversed view and mixed dtypes. Outputs are poisoned (all bytes
 * 0xFF, a NaN in every float dtype; cudaMemset on the GPU) before each run, so
 * an element left unwritten shows, and elements outside the output view must
 * stay poisoned on both sides. copy and fill must match the CPU bit for bit,
 * unary and binary norm-wise (f32 1e-5, f16/bf16 1e-2; NaN never passes), and
 * two GPU runs must be bitwise identical. Exits 77 ("skipped") without a GPU. */
#include "harness.h"
#include "runtime/ctx_impl.h"
#include "runtime/cuda_backend.h"

static cml_device gpu = {CML_CUDA, 0};
static cml_ctx *gctx; /* the default context of cuda:0 */
static cml_ctx *cctx; /* the default CPU context */
static cml_rng rng;

/* ---- buffers ---------------------------------------------------------------------------- */

static void *dev_alloc(size_t n) {
    const cml_allocator *a = cml_allocator_default(gpu);
    void *p = NULL;
    if (!a || a->alloc(a->state, &p, n ? n : 1, cml_ctx_stream(gctx)) != CML_OK) return NULL;
    return p;
}

static void dev_free(void *p, size_t n) {
    const cml_allocator *a = cml_allocator_default(gpu);
    if (a && p) a->free(a->state, p, n ? n : 1, cml_ctx_stream(gctx));
}

static void upload(void *d, const void *h, size_t n) { CHECK_OK(cml__cuda_memcpy(gctx, d, h, n, true, "upload")); }
static void download(void *h, const void *d, size_t n) { CHECK_OK(cml__cuda_memcpy(gctx, h, d, n, true, "download")); }
static void poison(void *d, size_t n) { CHECK_OK(cml__cuda_memset(gctx, d, 0xFF, n)); }

static float uniform(float lo, float hi) { return lo + (hi - lo) * cml_rng_uniform(&rng); }

/* n random values in [lo, hi) stored as dtype dt; quantized to multiples of 0.5 when q (for ties). */
static void random_fill(void *h, cml_dtype dt, int64_t n, float lo, float hi, bool q) {
    for (int64_t i = 0; i < n; i++) {
        float v = uniform(lo, hi);
        if (q) v = roundf(v * 2.0f) * 0.5f;
        cml_dtype_store(h, dt, i, v);
    }
}

/* ---- layouts ------------------------------------------------------------------------------- */

/* One test geometry: the output's shape, and per operand (0 = output) its strides,
 * the element offset of the view's first element and the size of its buffer. */
typedef struct geo {
    const char *name;
    int ndim;
    int64_t shape[3];
    int64_t stride[3][3];
    int64_t offset[3];
    int64_t bufn[3];
} geo;

enum { R = 33, C = 65, NGEO = 11 };
static geo geos[NGEO];

static void geo_flat(geo *g, const char *name, int64_t n) {
    *g = (geo){name, 1, {n}, {{1}, {1}, {1}}, {0, 0, 0}, {n, n, n}};
}

static void make_geos(void) {
    static const int64_t sizes[5] = {1, 7, 127, 1025, 4097};
    static const char *names[5] = {"n=1", "n=7", "n=127", "n=1025", "n=4097"};
    for (int i = 0; i < 5; i++) geo_flat(&geos[i], names[i], sizes[i]);
    /* (3,1,5) op (4,1) -> (3,4,5) */
    geos[5] = (geo){"bcast (3,1,5)+(4,1)", 3, {3, 4, 5}, {{20, 5, 1}, {5, 0, 1}, {0, 1, 0}}, {0, 0, 0}, {60, 15, 4}};
    /* inputs are transposed views of (R, C) buffers; the output is contiguous (C, R) */
    geos[6] = (geo){"transposed in", 2, {C, R}, {{R, 1}, {1, C}, {1, C}}, {0, 0, 0}, {R * C, R * C, R * C}};
    /* the output is a transposed view; inputs contiguous */
    geos[7] = (geo){"transposed out", 2, {C, R}, {{1, C}, {R, 1}, {R, 1}}, {0, 0, 0}, {R * C, R * C, R * C}};
    /* every view starts one element in: dense but not 16-byte aligned */
    geos[8] = (geo){"offset 1", 1, {1025}, {{1}, {1}, {1}}, {1, 1, 1}, {1026, 1026, 1026}};
    /* inputs read backwards */
    geos[9] = (geo){"reversed in", 1, {1000}, {{1}, {-1}, {-1}}, {0, 999, 999}, {1000, 1000, 1000}};
    /* output every other element (the rest must stay poisoned), second input broadcast scalar */
    geos[10] = (geo){"strided out", 2, {17, 9}, {{20, 2}, {9, 1}, {0, 0}}, {0, 0, 0}, {340, 153, 1}};
}

static cml_layout geo_layout(const geo *g, int k) {
    cml_layout l;
    memset(&l, 0, sizeof l);
    l.ndim = g->ndim;
    for (int d = 0; d < g->ndim; d++) {
        l.shape[d] = g->shape[d];
        l.stride[d] = g->stride[k][d];
    }
    return l;
}

/* ---- operands: a host copy, the CPU run's buffer and the GPU's buffer --------------------------- */

typedef struct operand {
    cml_dtype dt;
    size_t bytes;
    unsigned char *host; /* inputs: the data; output: the CPU result */
    unsigned char *got;  /* output: the GPU result, then the repeat */
    unsigned char *again;
    void *dev;
    int64_t offset;
    cml_layout layout;
} operand;

static bool operand_init(operand *o, const geo *g, int k, cml_dtype dt) {
    memset(o, 0, sizeof *o);
    o->dt = dt;
    o->bytes = (size_t)g->bufn[k] * cml_dtype_size(dt);
    o->host = malloc(o->bytes);
    o->got = malloc(o->bytes);
    o->again = malloc(o->bytes);
    o->dev = dev_alloc(o->bytes);
    o->offset = g->offset[k];
    o->layout = geo_layout(g, k);
    CHECK_NOT_NULL(o->dev);
    return o->host && o->got && o->again && o->dev;
}

static void operand_free(operand *o) {
    free(o->host);
    free(o->got);
    free(o->again);
    dev_free(o->dev, o->bytes);
}

static void *at(void *base, const operand *o) { return (char *)base + o->offset * (int64_t)cml_dtype_size(o->dt); }

/* How a GPU output must match the CPU's: RAW bytes (copies, fills); EXACT values
 * (correctly rounded ops; a NaN may come with another payload, since the payload of
 * a computed NaN differs between CPUs and GPUs, but never as the 0xFF poison); or
 * within a norm-wise relative error TOL (math-library functions). */
typedef enum match { RAW, EXACT, TOL } match;

static bool all_ff(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0xFF) return false;
    return true;
}

/* Compares the GPU output with the CPU's over the whole buffer (elements outside the
 * output view are poison on both sides and must stay so). */
static void compare(const char *what, const operand *y, match m, double tol) {
    int64_t n = (int64_t)(y->bytes / cml_dtype_size(y->dt));
    size_t es = cml_dtype_size(y->dt);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *g8 = y->got + i * es, *c8 = y->host + i * es;
        double c = cml_dtype_load(y->host, y->dt, i), g = cml_dtype_load(y->got, y->dt, i);
        if (memcmp(g8, c8, es) == 0) {
            if (!isnan(c)) den += c * c;
            continue;
        }
        if (m != RAW && isnan(c) && isnan(g) && !all_ff(g8, es)) continue;
        if (m != TOL || isnan(c) || isnan(g)) {
            uint64_t gb = 0, cb = 0;
            memcpy(&gb, g8, es);
            memcpy(&cb, c8, es);
            CHECK_MSG(false, "%s: element %lld is %g (0x%llx) on the GPU, %g (0x%llx) on the CPU", what, (long long)i,
                      g, (unsigned long long)gb, c, (unsigned long long)cb);
            return;
        }
        num += (g - c) * (g - c);
        den += c * c;
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    CHECK_MSG(rel <= tol, "%s: relative error %.3g > %.3g", what, rel, tol);
}

static double tol_for(cml_dtype dt) { return dt == CML_F32 ? 1e-5 : 1e-2; }

/* Runs fn twice on the GPU (poisoned output each time): checks the repeat is bitwise identical. */
#define GPU_TWICE(y, call)                                                          \
    do {                                                                            \
        poison((y)->dev, (y)->bytes);                                               \
        CHECK_OK(call);                                                             \
        download((y)->got, (y)->dev, (y)->bytes);                                   \
        poison((y)->dev, (y)->bytes);                                               \
        CHECK_OK(call);                                                             \
        download((y)->again, (y)->dev, (y)->bytes);                                 \
        CHECK_MSG(memcmp((y)->got, (y)->again, (y)->bytes) == 0, "%s: repeat differs", what); \
    } while (0)

/* ---- unary / binary ------------------------------------------------------------------------- */

typedef struct dtypes { cml_dtype y, a, b; } dtypes;
enum { NDTYPES = 6 };
static const dtypes dtype_sets[NDTYPES] = {
    {CML_F32, CML_F32, CML_F32},  {CML_BF16, CML_BF16, CML_BF16}, {CML_F16, CML_F16, CML_F16},
    {CML_F32, CML_BF16, CML_F32}, {CML_BF16, CML_F32, CML_F16},   {CML_U8, CML_F32, CML_BF16}};

static void unary_domain(cml_unary_op op, float *lo, float *hi, float *param) {
    *lo = -3.0f, *hi = 3.0f, *param = 0.0f;
    if (op == CML_UNARY_LOG || op == CML_UNARY_SQRT || op == CML_UNARY_POW_SCALAR) *lo = 0.1f;
    if (op == CML_UNARY_SCALE) *param = 1.7f;
    if (op == CML_UNARY_ADD_SCALAR) *param = -0.3f;
    if (op == CML_UNARY_POW_SCALAR) *param = 1.5f;
}

static void run_unary(const geo *g, const dtypes *dts, int op) {
    operand y, x;
    bool ok = operand_init(&y, g, 0, dts->y) & operand_init(&x, g, 1, dts->a);
    char what[128];
    snprintf(what, sizeof what, "unary op=%d %s %s<-%s", op, g->name, cml_dtype_name(y.dt), cml_dtype_name(x.dt));
    if (ok) {
        float lo, hi, p;
        unary_domain((cml_unary_op)op, &lo, &hi, &p);
        random_fill(x.host, x.dt, (int64_t)(x.bytes / cml_dtype_size(x.dt)), lo, hi, false);
        upload(x.dev, x.host, x.bytes);
        memset(y.host, 0xFF, y.bytes);
        CHECK_OK(cml_unary(cctx, (cml_unary_op)op, p, at(y.host, &y), &y.layout, y.dt, at(x.host, &x), &x.layout,
                           x.dt));
        GPU_TWICE(&y, cml_unary(gctx, (cml_unary_op)op, p, at(y.dev, &y), &y.layout, y.dt, at(x.dev, &x), &x.layout,
                                x.dt));
        compare(what, &y, op == CML_UNARY_IDENTITY || op == CML_UNARY_NEG || op == CML_UNARY_ABS ? EXACT : TOL,
                tol_for(y.dt));
    }
    operand_free(&y);
    operand_free(&x);
}

static void test_unary(void) {
    for (int gi = 0; gi < NGEO; gi++)
        for (int di = 0; di < NDTYPES; di++)
            for (int op = 0; op < CML_UNARY_OP_COUNT; op++) run_unary(&geos[gi], &dtype_sets[di], op);
}

static void run_binary(const geo *g, const dtypes *dts, int op) {
    operand y, a, b;
    bool ok = operand_init(&y, g, 0, dts->y) & operand_init(&a, g, 1, dts->a) & operand_init(&b, g, 2, dts->b);
    char what[128];
    snprintf(what, sizeof what, "binary op=%d %s %s<-%s,%s", op, g->name, cml_dtype_name(y.dt), cml_dtype_name(a.dt),
             cml_dtype_name(b.dt));
    if (ok) {
        bool ties = op == CML_BINARY_EQ || op == CML_BINARY_GT || op == CML_BINARY_MAX || op == CML_BINARY_MIN;
        bool pow = op == CML_BINARY_POW;
        int64_t na = (int64_t)(a.bytes / cml_dtype_size(a.dt)), nb = (int64_t)(b.bytes / cml_dtype_size(b.dt));
        random_fill(a.host, a.dt, na, pow ? 0.1f : -3.0f, 3.0f, ties);
        if (op == CML_BINARY_DIV) /* |b| in [0.5, 2) */
            for (int64_t i = 0; i < nb; i++) cml_dtype_store(b.host, b.dt, i, (i % 2 ? -1.0f : 1.0f) * uniform(0.5f, 2.0f));
        else
            random_fill(b.host, b.dt, nb, pow ? -2.0f : -3.0f, pow ? 2.0f : 3.0f, ties);
        upload(a.dev, a.host, a.bytes);
        upload(b.dev, b.host, b.bytes);
        memset(y.host, 0xFF, y.bytes);
        CHECK_OK(cml_binary(cctx, (cml_binary_op)op, at(y.host, &y), &y.layout, y.dt, at(a.host, &a), &a.layout, a.dt,
                            at(b.host, &b), &b.layout, b.dt));
        GPU_TWICE(&y, cml_binary(gctx, (cml_binary_op)op, at(y.dev, &y), &y.layout, y.dt, at(a.dev, &a), &a.layout,
                                 a.dt, at(b.dev, &b), &b.layout, b.dt));
        /* + - * max min == > are correctly rounded on both sides: bitwise equal */
        compare(what, &y, op != CML_BINARY_POW && op != CML_BINARY_DIV ? EXACT : TOL, tol_for(y.dt));
    }
    operand_free(&y);
    operand_free(&a);
    operand_free(&b);
}

static void test_binary(void) {
    for (int gi = 0; gi < NGEO; gi++)
        for (int di = 0; di < NDTYPES; di++)
            for (int op = 0; op < CML_BINARY_OP_COUNT; op++) run_binary(&geos[gi], &dtype_sets[di], op);
}

/* NaN propagates through relu, max and min as on the CPU. */
static void test_nan_propagation(void) {
    const char *what = "nan propagation";
    geo g;
    geo_flat(&g, "n=64", 64);
    operand y, a, b;
    if (operand_init(&y, &g, 0, CML_F32) & operand_init(&a, &g, 1, CML_F32) & operand_init(&b, &g, 2, CML_F32)) {
        random_fill(a.host, CML_F32, 64, -3, 3, false);
        random_fill(b.host, CML_F32, 64, -3, 3, false);
        for (int i = 0; i < 64; i += 3) ((float *)a.host)[i] = NAN;
        for (int i = 1; i < 64; i += 5) ((float *)b.host)[i] = NAN;
        upload(a.dev, a.host, a.bytes);
        upload(b.dev, b.host, b.bytes);
        for (int op = CML_BINARY_MAX; op <= CML_BINARY_MIN; op++) {
            CHECK_OK(cml_binary(cctx, (cml_binary_op)op, y.host, &y.layout, CML_F32, a.host, &a.layout, CML_F32,
                                b.host, &b.layout, CML_F32));
            GPU_TWICE(&y, cml_binary(gctx, (cml_binary_op)op, y.dev, &y.layout, CML_F32, a.dev, &a.layout, CML_F32,
                                     b.dev, &b.layout, CML_F32));
            compare(what, &y, EXACT, 0);
        }
        CHECK_OK(cml_unary(cctx, CML_UNARY_RELU, 0, y.host, &y.layout, CML_F32, a.host, &a.layout, CML_F32));
        GPU_TWICE(&y, cml_unary(gctx, CML_UNARY_RELU, 0, y.dev, &y.layout, CML_F32, a.dev, &a.layout, CML_F32));
        compare(what, &y, EXACT, 0);
    }
    operand_free(&y);
    operand_free(&a);
    operand_free(&b);
}

/* ---- copy / fill -------------------------------------------------------------------------------- */

/* Special values first (NaNs with payloads, infinities, -0, subnormals, rounding ties,
 * f16 overflow), then random values of all magnitudes. */
static void copy_source(void *h, cml_dtype dt, int64_t n) {
    static const uint32_t special[] = {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7F800000u, 0xFF800000u,
                                       0x80000000u, 0x00000001u, 0x00800000u, 0x3F808000u, 0x3F818000u,
                                       0x477FF000u, 0x47800000u, 0x33800000u, 0x387FC000u};
    for (int64_t i = 0; i < n; i++) {
        float v;
        if (i < (int64_t)(sizeof special / sizeof special[0])) memcpy(&v, &special[i], 4);
        else v = uniform(-1, 1) * powf(2.0f, uniform(-30, 30));
        if (dt == CML_F32) ((float *)h)[i] = v;
        else if (dt == CML_I64) ((int64_t *)h)[i] = (int64_t)cml_rng_u32(&rng) << 20 | i;
        else if (dt == CML_U8) ((uint8_t *)h)[i] = (uint8_t)cml_rng_u32(&rng);
        else cml_dtype_store(h, dt, i, v);
    }
}

static void run_copy(const geo *g, cml_dtype ydt, cml_dtype xdt) {
    operand y, x;
    bool ok = operand_init(&y, g, 0, ydt) & operand_init(&x, g, 1, xdt);
    char what[128];
    snprintf(what, sizeof what, "copy %s %s<-%s", g->name, cml_dtype_name(y.dt), cml_dtype_name(x.dt));
    if (ok) {
        copy_source(x.host, x.dt, (int64_t)(x.bytes / cml_dtype_size(x.dt)));
        upload(x.dev, x.host, x.bytes);
        memset(y.host, 0xFF, y.bytes);
        CHECK_OK(cml_copy(cctx, at(y.host, &y), &y.layout, y.dt, at(x.host, &x), &x.layout, x.dt));
        GPU_TWICE(&y, cml_copy(gctx, at(y.dev, &y), &y.layout, y.dt, at(x.dev, &x), &x.layout, x.dt));
        compare(what, &y, RAW, 0);
    }
    operand_free(&y);
    operand_free(&x);
}

static void test_copy(void) {
    static const cml_dtype pairs[][2] = {
        {CML_F32, CML_F32},  {CML_F32, CML_BF16}, {CML_F32, CML_F16},  {CML_BF16, CML_F32}, {CML_BF16, CML_BF16},
        {CML_BF16, CML_F16}, {CML_F16, CML_F32},  {CML_F16, CML_BF16}, {CML_F16, CML_F16},  {CML_I64, CML_I64},
        {CML_U8, CML_U8}};
    for (int gi = 0; gi < NGEO; gi++)
        for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++) run_copy(&geos[gi], pairs[pi][0], pairs[pi][1]);
}

static void run_fill(const geo *g, cml_dtype dt, double value) {
    operand y;
    char what[128];
    snprintf(what, sizeof what, "fill %s %s %g", g->name, cml_dtype_name(dt), value);
    if (operand_init(&y, g, 0, dt)) {
        memset(y.host, 0xFF, y.bytes);
        CHECK_OK(cml_fill(cctx, at(y.host, &y), &y.layout, y.dt, value));
        GPU_TWICE(&y, cml_fill(gctx, at(y.dev, &y), &y.layout, y.dt, value));
        compare(what, &y, RAW, 0);
    }
    operand_free(&y);
}

static void test_fill(void) {
    static const cml_dtype dts[] = {CML_F32, CML_F16, CML_BF16, CML_F8E4M3, CML_I32, CML_I64, CML_U8};
    static const double values[] = {1.5, -0.3, 1e10, -7.0};
    for (int gi = 0; gi < NGEO; gi++)
        for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++)
            for (size_t vi = 0; vi < sizeof values / sizeof values[0]; vi++) run_fill(&geos[gi], dts[di], values[vi]);
}

/* Sizes beyond one sweep of the grid (132 SMs x 2048 threads x 8 elements), so that
 * threads go round the grid-stride loop several times; odd, so there is a tail. */
static void test_large(void) {
    geo g;
    geo_flat(&g, "n=2^23+5", (1 << 23) + 5);
    for (int di = 0; di < 2; di++) {
        run_unary(&g, &dtype_sets[di], CML_UNARY_GELU_TANH);
        run_binary(&g, &dtype_sets[di], CML_BINARY_MUL);
        run_fill(&g, dtype_sets[di].y, -0.3);
    }
    run_copy(&g, CML_BF16, CML_F32);
    run_copy(&g, CML_F32, CML_F32);
}

static void test_unsupported_dtypes(void) {
    void *p = dev_alloc(64);
    int64_t n = 4;
    cml_layout l = {1, {n}, {1}};
    CHECK_STATUS(cml_unary(gctx, CML_UNARY_EXP, 0, p, &l, CML_I64, p, &l, CML_I64), CML_ERR_UNSUPPORTED,
                 "cml_unary: y_dtype=i64 is not supported on CUDA yet");
    CHECK_STATUS(cml_binary(gctx, CML_BINARY_ADD, p, &l, CML_F32, p, &l, CML_U8, p, &l, CML_F32), CML_ERR_UNSUPPORTED,
                 "cml_binary: a_dtype=u8 is not supported on CUDA yet");
    CHECK_STATUS(cml_copy(gctx, p, &l, CML_F32, p, &l, CML_I32), CML_ERR_UNSUPPORTED,
                 "cml_copy: converting i32 to f32 is not supported on CUDA yet");
    dev_free(p, 64);
}

/* ---- runtime and framework ---------------------------------------------------------------------- */

static void test_contexts(void) {
    CHECK(cml_ctx_default(gpu) == gctx);
    CHECK(cml_ctx_stream(gctx) != NULL);
    cml_ctx *own = NULL;
    CHECK_OK(cml_ctx_create(&own, gpu));
    if (own) {
        CHECK(cml_ctx_stream(own) != NULL && cml_ctx_stream(own) != cml_ctx_stream(gctx));
        void *w = NULL;
        CHECK_OK(cml_ctx_workspace(own, &w, 1000));
        CHECK_OK(cml_ctx_workspace(own, &w, 1 << 20));
        CHECK_OK(cml__cuda_memset(own, w, 0, 1 << 20));
        CHECK_OK(cml_ctx_synchronize(own));
        cml_ctx_destroy(own);
    }
    CHECK_STATUS(cml_ctx_create(&own, (cml_device){CML_CUDA, 999}), CML_ERR_CUDA, "cuda:999 does not exist");
}

static void test_round_trips(void) {
    int64_t shape[2] = {R, C};
    int64_t n = R * C;
    float *h = malloc(sizeof(float) * (size_t)n), *back = malloc(sizeof(float) * (size_t)n);
    int64_t *hi = malloc(sizeof(int64_t) * (size_t)n), *backi = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        h[i] = uniform(-5, 5);
        hi[i] = ((int64_t)cml_rng_u32(&rng) << 31) - i;
    }
    cml_tensor *d = cml_tensor_from_host(h, 2, shape, CML_F32, gpu);
    cml_tensor *di = cml_tensor_from_host(hi, 2, shape, CML_I64, gpu);
    CHECK_NOT_NULL(d);
    CHECK_NOT_NULL(di);
    if (d && di) {
        CHECK(cml_device_equal(cml_tensor_device(d), gpu));
        memset(back, 0, sizeof(float) * (size_t)n);
        CHECK_OK(cml_tensor_to_host(d, back, sizeof(float) * (size_t)n));
        CHECK(memcmp(h, back, sizeof(float) * (size_t)n) == 0);
        CHECK_OK(cml_tensor_to_host(di, backi, sizeof(int64_t) * (size_t)n));
        CHECK(memcmp(hi, backi, sizeof(int64_t) * (size_t)n) == 0);
        CHECK(cml_tensor_item_at(d, (int64_t[]){2, 3}) == (double)h[2 * C + 3]);

        /* a transposed device view comes back in its own row-major order, like on the CPU */
        cml_tensor *cpu = cml_tensor_from_host(h, 2, shape, CML_F32, CML_DEVICE_CPU);
        cml_tensor *dt = cml_transpose(d, 0, 1), *ct = cml_transpose(cpu, 0, 1);
        float *want = malloc(sizeof(float) * (size_t)n);
        CHECK_OK(cml_tensor_to_host(ct, want, sizeof(float) * (size_t)n));
        CHECK_OK(cml_tensor_to_host(dt, back, sizeof(float) * (size_t)n));
        CHECK(memcmp(want, back, sizeof(float) * (size_t)n) == 0);

        /* cml_tensor_to both ways, from a non-contiguous CPU view, with a dtype change through copy_ */
        cml_tensor *up = cml_tensor_to(ct, gpu), *down = up ? cml_tensor_to(up, CML_DEVICE_CPU) : NULL;
        CHECK_NOT_NULL(down);
        if (down) {
            CHECK_OK(cml_tensor_to_host(down, back, sizeof(float) * (size_t)n));
            CHECK(memcmp(want, back, sizeof(float) * (size_t)n) == 0);
        }
        int64_t tshape[2] = {C, R};
        cml_tensor *bf_gpu = cml_tensor_empty(2, tshape, CML_BF16, gpu);
        cml_tensor *bf_cpu = cml_tensor_empty(2, tshape, CML_BF16, CML_DEVICE_CPU);
        if (bf_gpu && bf_cpu) {
            CHECK_OK(cml_tensor_copy_(bf_gpu, ct)); /* cpu f32 view -> gpu bf16 */
            CHECK_OK(cml_tensor_copy_(bf_cpu, ct));
            uint16_t *g16 = malloc(2 * (size_t)n), *c16 = malloc(2 * (size_t)n);
            CHECK_OK(cml_tensor_to_host(bf_gpu, g16, 2 * (size_t)n));
            CHECK_OK(cml_tensor_to_host(bf_cpu, c16, 2 * (size_t)n));
            CHECK(memcmp(g16, c16, 2 * (size_t)n) == 0);
            free(g16);
            free(c16);
        }
        /* gpu i64 -> cpu f32: a conversion the GPU kernels lack is done on the host side */
        cml_tensor *di_cpu = cml_tensor_from_host(hi, 2, shape, CML_I64, CML_DEVICE_CPU);
        cml_tensor *f_got = cml_tensor_empty(2, shape, CML_F32, CML_DEVICE_CPU);
        cml_tensor *f_ref = cml_tensor_empty(2, shape, CML_F32, CML_DEVICE_CPU);
        if (di_cpu && f_got && f_ref) {
            CHECK_OK(cml_tensor_copy_(f_got, di));
            CHECK_OK(cml_tensor_copy_(f_ref, di_cpu));
            CHECK(memcmp(cml_tensor_data(f_got), cml_tensor_data(f_ref), sizeof(float) * (size_t)n) == 0);
        }
        cml_tensor *conv[] = {di_cpu, f_got, f_ref};
        cml_tensor_release_all(conv, 3);
        /* framework ops run on the GPU through the kernel layer */
        cml_tensor *s_gpu = cml_add(dt, up), *s_cpu = cml_add(ct, ct);
        CHECK_NOT_NULL(s_gpu);
        if (s_gpu && s_cpu) {
            float *sg = malloc(sizeof(float) * (size_t)n), *sc = malloc(sizeof(float) * (size_t)n);
            CHECK_OK(cml_tensor_to_host(s_gpu, sg, sizeof(float) * (size_t)n));
            CHECK_OK(cml_tensor_to_host(s_cpu, sc, sizeof(float) * (size_t)n));
            CHECK(memcmp(sg, sc, sizeof(float) * (size_t)n) == 0);
            free(sg);
            free(sc);
        }
        cml_tensor *z = cml_tensor_zeros(2, shape, CML_F32, gpu);
        CHECK(z && cml_tensor_item_at(z, (int64_t[]){R - 1, C - 1}) == 0.0);
        cml_tensor *ar = cml_tensor_arange(0, 10, 1, CML_I64, gpu);
        CHECK(ar && cml_tensor_item_at(ar, (int64_t[]){7}) == 7.0);
        cml_tensor *list[] = {cpu, dt, ct, up, down, bf_gpu, bf_cpu, s_gpu, s_cpu, z, ar};
        cml_tensor_release_all(list, (int)(sizeof list / sizeof list[0]));
        free(want);
    }
    cml_tensor_release(d);
    cml_tensor_release(di);
    free(h);
    free(back);
    free(hi);
    free(backi);
}

static void test_oom(void) {
    int64_t petabyte = (int64_t)1 << 48; /* f32 elements: 1 PiB */
    cml_clear_error();
    cml_tensor *huge = cml_tensor_empty(1, &petabyte, CML_F32, gpu);
    CHECK(huge == NULL);
    CHECK_ERROR(CML_ERR_OOM, "allocating 1125899906842624 bytes");
    CHECK_ERROR(CML_ERR_OOM, "GiB free of");
    printf("     (the message: %s)\n", cml_last_error());
    cml_tensor_release(huge);
    /* the process is still usable: allocate, compute, read back */
    int64_t n = 1 << 20;
    cml_tensor *t = cml_tensor_full(1, &n, 2.5, CML_F32, gpu);
    CHECK_NOT_NULL(t);
    if (t) CHECK(cml_tensor_item_at(t, (int64_t[]){n - 1}) == 2.5);
    cml_tensor_release(t);
    CHECK_OK(cml_ctx_synchronize(gctx));
}

/* After a warm-up step, repeating the same allocations reserves nothing new from the driver. */
static void test_pool_reuse(void) {
    size_t reserved0 = 0, reserved1 = 0, used = 0, peak = 0;
    for (int step = 0; step < 20; step++) {
        if (step == 1) CHECK_OK(cml__cuda_pool_stats(0, &reserved0, NULL, NULL));
        int64_t sizes[3] = {1 << 18, 3 << 18, 1 << 21};
        cml_tensor *ts[3];
        for (int i = 0; i < 3; i++) ts[i] = cml_tensor_full(1, &sizes[i], (double)step, CML_F32, gpu);
        CHECK(ts[0] && ts[1] && ts[2]);
        cml_tensor_release_all(ts, 3);
    }
    CHECK_OK(cml_ctx_synchronize(gctx));
    CHECK_OK(cml__cuda_pool_stats(0, &reserved1, &used, &peak));
    CHECK_MSG(reserved1 == reserved0, "pool grew from %zu to %zu bytes in the steady state", reserved0, reserved1);
    CHECK(peak >= (size_t)(1 << 21) * 4);
}

int main(void) {
    const char *why = NULL;
    if (!cml_cuda_available(&why)) {
        printf("skipped: %s\n", why);
        return 77;
    }
    gctx = cml_ctx_default(gpu);
    cctx = cml_ctx_default(CML_DEVICE_CPU);
    if (!gctx || !cctx) {
        printf("FAIL: no default context: %s\n", cml_last_error());
        return 1;
    }
    cml_rng_init(&rng, 1234);
    make_geos();
    RUN(test_contexts);
    RUN(test_copy);
    RUN(test_fill);
    RUN(test_unary);
    RUN(test_binary);
    RUN(test_large);
    RUN(test_nan_propagation);
    RUN(test_unsupported_dtypes);
    RUN(test_round_trips);
    RUN(test_oom);
    RUN(test_pool_reuse);
    return th_finish();
}
