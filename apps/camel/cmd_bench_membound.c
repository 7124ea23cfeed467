/* camel bench membound: the memory-bound kernels (sum, softmax, layernorm,
 * rmsnorm, cross-entropy, forward and backward; the scaled fp8 conversion)
 * against the device-to-device copy bandwidth measured in the same process.
 *
 * Method (DESIGN.md section 5): random inputs; 3 warm-up calls; then --reps
 * timed calls (median reported), each preceded by an untimed 256 MB memset so
 * that every call starts with an L2 holding none of its data; CUDA events on
 * the context's stream around the public kernel-layer call. GB/s counts the
 * bytes that must move: each input read once, each output written once. The
 * copy reference is cudaMemcpyAsync of a 1 GiB buffer, counting bytes read
 * plus written. Cross-entropy calls wait for their one 8-byte flag copy (bad
 * targets, see src/kernels/cuda/softmax/cross_entropy.cu): that wait is in
 * their time, as a caller would see it. bench/torch_membound.py measures
 * PyTorch the same way and joins the two JSON files.
 *
 * CUDA runtime calls (events, buffers) are made here directly: this is a
 * benchmark of the kernel layer, not framework code. A build without CUDA
 * has the command (and its --help) but says it cannot run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "camel/camel.h"
#include "cli.h"

enum {
    OP_SUM,
    OP_SOFTMAX,
    OP_SOFTMAX_BWD,
    OP_LAYERNORM,
    OP_LAYERNORM_BWD,
    OP_RMSNORM,
    OP_RMSNORM_BWD,
    OP_CE,
    OP_CE_BWD,
    OP_FP8,
    OP_FP8_AMAX,
    OP_COUNT
};
static const char *const OP_NAMES[OP_COUNT] = {
    "sum",       "softmax",       "softmax_bwd",   "layernorm",         "layernorm_bwd",        "rmsnorm",
    "rmsnorm_bwd", "cross_entropy", "cross_entropy_bwd", "convert_scaled_e4m3", "convert_scaled_e4m3_amax"};

#define USAGE "camel bench membound [options]"
#define ABOUT                                                                                                       \
    "Times the memory-bound CUDA kernels (" BENCH_OPS ") on rows x cols in {4096x1024, 4096x4096, 16384x8192, "    \
    "1024x32768, 256x262144}, f32 and bf16, plus a 1 GiB flat f32 sum, against a 1 GiB device-to-device copy "      \
    "measured in the same process: the median of --reps calls, each after an untimed 256 MB memset (cold L2), "    \
    "GB/s = bytes that must move / time. convert_scaled_e4m3 is cml_convert_scaled to f8e4m3 with a device-side "  \
    "scale (dtype = the input's), _amax also writes max |x|. Prints a table; --json writes the results format of " \
    "DESIGN.md (bench/torch_membound.py --combine adds PyTorch's numbers). Needs a CUDA build and a GPU (exit "    \
    "code 77 otherwise)."
#define BENCH_OPS                                                                                                   \
    "sum, softmax, softmax_bwd, layernorm, layernorm_bwd, rmsnorm, rmsnorm_bwd, cross_entropy, cross_entropy_bwd, " \
    "convert_scaled_e4m3, convert_scaled_e4m3_amax"

typedef struct bench_opts {
    int64_t reps;
    bool quick;
    bool want[OP_COUNT];
    const char *json, *commit;
    char command[512];
} bench_opts;

/* --ops: comma-separated names of OP_NAMES; false with a message on an unknown one. */
static bool parse_ops(const char *text, bool *want) {
    for (int k = 0; k < OP_COUNT; k++) want[k] = text == NULL;
    if (!text) return true;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int k = 0; k < OP_COUNT && found < 0; k++)
            if (strlen(OP_NAMES[k]) == len && strncmp(OP_NAMES[k], p, len) == 0) found = k;
        if (found < 0) {
            fprintf(stderr, "camel: --ops: unknown op \"%.*s\"; the ops are: %s\n", (int)len, p, BENCH_OPS);
            return false;
        }
        want[found] = true;
        p += len + (p[len] == ',');
    }
    return true;
}

#ifdef CML_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "runtime/ctx_impl.h"

#define CUDA_OK(call)                                                                                    \
    do {                                                                                                 \
        cudaError_t e_ = (call);                                                                         \
        if (e_ != cudaSuccess) {                                                                         \
            fprintf(stderr, "camel bench membound: %s failed: %s\n", #call, cudaGetErrorString(e_));     \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)
#define CML_OK(call)                                                                                     \
    do {                                                                                                 \
        if ((call) != CML_OK) {                                                                          \
            fprintf(stderr, "camel bench membound: %s failed: %s\n", #call, cml_last_error());           \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

static const int64_t SHAPES[][2] = {{4096, 1024}, {4096, 4096}, {16384, 8192}, {1024, 32768}, {256, 262144}};
enum { N_SHAPES = 5 };
#define MAX_ELEMS ((int64_t)16384 * 8192)
#define MAX_ROWS 16384
#define MAX_COLS 262144
#define FLAT_ELEMS ((int64_t)1 << 28) /* 1 GiB of f32 */
#define FLUSH_BYTES ((size_t)256 << 20)
#define MAX_REPS 1000
#define FP8_SCALE 64.0f /* x in [-3, 3) -> [-192, 192): inside e4m3's range, every exponent used */

typedef struct bench {
    cml_ctx *ctx;
    cudaStream_t st;
    cudaEvent_t ev0, ev1;
    void *flush;
    int reps;
    /* inputs (random), per dtype: 0 = f32, 1 = bf16 */
    void *x[2], *dy[2], *gamma[2], *beta[2];
    void *y, *dgamma, *dbeta; /* outputs */
    float *mean, *rstd, *loss, *dloss, *scale, *amax;
    int64_t *targets;
} bench;

typedef struct run_args {
    int op;
    cml_dtype dt;
    int d; /* dtype slot */
    int64_t rows, cols;
} run_args;

static cml_status run_op(bench *b, const run_args *a) {
    const int d = a->d;
    switch (a->op) {
    case OP_SUM: return cml_reduce(b->ctx, CML_REDUCE_SUM, b->y, a->dt, b->x[d], a->dt, a->rows, a->cols, 1, 0);
    case OP_SOFTMAX: return cml_softmax_fwd(b->ctx, b->y, b->x[d], a->rows, a->cols, 1, a->dt, false);
    case OP_SOFTMAX_BWD: return cml_softmax_bwd(b->ctx, b->y, b->dy[d], b->x[d], a->rows, a->cols, 1, a->dt, false);
    case OP_LAYERNORM:
        return cml_layernorm_fwd(b->ctx, b->y, b->mean, b->rstd, b->x[d], b->gamma[d], b->beta[d], a->rows, a->cols,
                                 1e-5f, a->dt);
    case OP_LAYERNORM_BWD:
        return cml_layernorm_bwd(b->ctx, b->y, b->dgamma, b->dbeta, b->dy[d], b->x[d], b->gamma[d], b->mean, b->rstd,
                                 a->rows, a->cols, a->dt);
    case OP_RMSNORM:
        return cml_rmsnorm_fwd(b->ctx, b->y, b->rstd, b->x[d], b->gamma[d], a->rows, a->cols, 1e-5f, a->dt);
    case OP_RMSNORM_BWD:
        return cml_rmsnorm_bwd(b->ctx, b->y, b->dgamma, b->dy[d], b->x[d], b->gamma[d], b->rstd, a->rows, a->cols,
                               a->dt);
    case OP_CE: return cml_cross_entropy_fwd(b->ctx, b->loss, b->x[d], b->targets, a->rows, a->cols, a->dt, -100);
    case OP_CE_BWD:
        return cml_cross_entropy_bwd(b->ctx, b->y, b->dloss, b->x[d], b->targets, a->rows, a->cols, a->dt, -100);
    default:
        return cml_convert_scaled(b->ctx, b->y, CML_F8E4M3, b->x[d], a->dt, a->rows * a->cols, b->scale,
                                  a->op == OP_FP8_AMAX ? b->amax : NULL);
    }
}

/* Bytes that must move: inputs read once, outputs written once (same counts in torch_membound.py). */
static double op_bytes(int op, int64_t rows, int64_t cols, size_t es) {
    const double rc = (double)rows * (double)cols * (double)es, r = (double)rows, c = (double)cols * (double)es;
    const double n = (double)rows * (double)cols;
    switch (op) {
    case OP_SUM: return rc + r * (double)es;
    case OP_SOFTMAX: return 2 * rc;
    case OP_SOFTMAX_BWD: return 3 * rc;
    case OP_LAYERNORM: return 2 * rc + 2 * c + 8 * r;     /* x, y, gamma, beta, mean, rstd */
    case OP_LAYERNORM_BWD: return 3 * rc + 3 * c + 8 * r; /* dy, x, dx, gamma, dgamma, dbeta, mean, rstd */
    case OP_RMSNORM: return 2 * rc + c + 4 * r;           /* x, y, gamma, rstd */
    case OP_RMSNORM_BWD: return 3 * rc + 2 * c + 4 * r;   /* dy, x, dx, gamma, dgamma, rstd */
    case OP_CE: return rc + 12 * r;                       /* logits, targets (i64), loss (f32) */
    case OP_CE_BWD: return 2 * rc + 12 * r;               /* logits, dlogits, targets, dloss */
    case OP_FP8: return rc + n + 4;                       /* x, y (1 byte each), scale */
    default: return rc + n + 8;                           /* x, y, scale, amax */
    }
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median milliseconds of `reps` calls of fn(b, arg), each after an untimed L2 flush. */
typedef void (*call_fn)(bench *b, const void *arg);

static float time_median(bench *b, call_fn fn, const void *arg) {
    float t[MAX_REPS];
    for (int i = 0; i < 3; i++) fn(b, arg);
    for (int i = 0; i < b->reps; i++) {
        CUDA_OK(cudaMemsetAsync(b->flush, i & 0xFF, FLUSH_BYTES, b->st));
        CUDA_OK(cudaEventRecord(b->ev0, b->st));
        fn(b, arg);
        CUDA_OK(cudaEventRecord(b->ev1, b->st));
        CUDA_OK(cudaEventSynchronize(b->ev1));
        CUDA_OK(cudaEventElapsedTime(&t[i], b->ev0, b->ev1));
    }
    qsort(t, (size_t)b->reps, sizeof t[0], cmp_float);
    return b->reps % 2 ? t[b->reps / 2] : 0.5f * (t[b->reps / 2 - 1] + t[b->reps / 2]);
}

static void call_op(bench *b, const void *arg) { CML_OK(run_op(b, (const run_args *)arg)); }

typedef struct copy_args {
    void *dst;
    const void *src;
    size_t bytes;
} copy_args;

static void call_copy(bench *b, const void *arg) {
    const copy_args *c = arg;
    CUDA_OK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, b->st));
}

/* ---- set-up ---------------------------------------------------------------------------------- */

static void *dmalloc(size_t n) {
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, n));
    return p;
}

/* Fills n f32 elements of dst with uniform random values in [lo, hi), 16M at a time from the host. */
static void fill_random_f32(float *dst, int64_t n, uint64_t seed, float lo, float hi) {
    const int64_t block = (int64_t)1 << 24;
    float *h = malloc(sizeof(float) * (size_t)block);
    if (!h) {
        fprintf(stderr, "camel bench membound: out of host memory\n");
        exit(1);
    }
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < block; i++) { /* xorshift64* */
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        h[i] = lo + (hi - lo) * (float)((s * 0x2545F4914F6CDD1Dull) >> 40) * (1.0f / 16777216.0f);
    }
    for (int64_t i = 0; i < n; i += block)
        CUDA_OK(cudaMemcpy(dst + i, h, sizeof(float) * (size_t)(n - i < block ? n - i : block), cudaMemcpyHostToDevice));
    free(h);
}

static void to_bf16(bench *b, void *dst, const void *src, int64_t n) {
    cml_layout l = {1, {n}, {1}};
    CML_OK(cml_copy(b->ctx, dst, &l, CML_BF16, src, &l, CML_F32));
}

static void setup(bench *b) {
    cml_device dev = {CML_CUDA, 0};
    b->ctx = cml_ctx_default(dev);
    if (!b->ctx) {
        fprintf(stderr, "camel bench membound: no CUDA context: %s\n", cml_last_error());
        exit(1);
    }
    b->st = (cudaStream_t)cml__ctx_stream(b->ctx);
    CUDA_OK(cudaEventCreate(&b->ev0));
    CUDA_OK(cudaEventCreate(&b->ev1));
    b->flush = dmalloc(FLUSH_BYTES);
    b->x[0] = dmalloc(sizeof(float) * (size_t)FLAT_ELEMS); /* also the flat 1 GiB sum's input */
    b->dy[0] = dmalloc(sizeof(float) * (size_t)MAX_ELEMS);
    b->x[1] = dmalloc(2 * (size_t)MAX_ELEMS);
    b->dy[1] = dmalloc(2 * (size_t)MAX_ELEMS);
    b->y = dmalloc(sizeof(float) * (size_t)MAX_ELEMS);
    fill_random_f32(b->x[0], FLAT_ELEMS, 1, -3.0f, 3.0f);
    fill_random_f32(b->dy[0], MAX_ELEMS, 2, -1.0f, 1.0f);
    to_bf16(b, b->x[1], b->x[0], MAX_ELEMS);
    to_bf16(b, b->dy[1], b->dy[0], MAX_ELEMS);
    for (int d = 0; d < 2; d++) {
        b->gamma[d] = dmalloc(sizeof(float) * MAX_COLS);
        b->beta[d] = dmalloc(sizeof(float) * MAX_COLS);
    }
    fill_random_f32(b->gamma[0], MAX_COLS, 3, 0.5f, 1.5f);
    fill_random_f32(b->beta[0], MAX_COLS, 4, -0.5f, 0.5f);
    to_bf16(b, b->gamma[1], b->gamma[0], MAX_COLS);
    to_bf16(b, b->beta[1], b->beta[0], MAX_COLS);
    b->dgamma = dmalloc(sizeof(float) * MAX_COLS);
    b->dbeta = dmalloc(sizeof(float) * MAX_COLS);
    b->mean = dmalloc(sizeof(float) * MAX_ROWS);
    b->rstd = dmalloc(sizeof(float) * MAX_ROWS);
    b->loss = dmalloc(sizeof(float) * MAX_ROWS);
    b->dloss = dmalloc(sizeof(float) * MAX_ROWS);
    b->targets = dmalloc(sizeof(int64_t) * MAX_ROWS);
    b->scale = dmalloc(2 * sizeof(float));
    b->amax = b->scale + 1;
    fill_random_f32(b->mean, MAX_ROWS, 5, -0.1f, 0.1f);
    fill_random_f32(b->rstd, MAX_ROWS, 6, 0.5f, 2.0f);
    fill_random_f32(b->dloss, MAX_ROWS, 7, 0.5f, 1.5f);
    const float scale = FP8_SCALE;
    CUDA_OK(cudaMemcpy(b->scale, &scale, sizeof scale, cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
}

/* Random targets in [0, cols) for the rows of the next shape. */
static void set_targets(bench *b, int64_t cols) {
    static int64_t h[MAX_ROWS];
    uint64_t s = 0x12345678ull + (uint64_t)cols;
    for (int i = 0; i < MAX_ROWS; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        h[i] = (int64_t)((s * 0x2545F4914F6CDD1Dull >> 33) % (uint64_t)cols);
    }
    CUDA_OK(cudaMemcpy(b->targets, h, sizeof h, cudaMemcpyHostToDevice));
}

/* ---- output ------------------------------------------------------------------------------------ */

typedef struct record {
    const char *op;
    const char *dtype;
    int64_t rows, cols;
    double bytes, ms, gbps;
} record;

static void write_json(const char *path, const record *r, int n, double copy_gbps, const bench_opts *o) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "camel bench membound: cannot write %s\n", path);
        exit(1);
    }
    struct cudaDeviceProp p;
    CUDA_OK(cudaGetDeviceProperties(&p, 0));
    int clock_khz = 0, mem_khz = 0, rt = 0, drv = 0;
    CUDA_OK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    CUDA_OK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0));
    CUDA_OK(cudaRuntimeGetVersion(&rt));
    CUDA_OK(cudaDriverGetVersion(&drv));
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(f, "{\n  \"meta\": {\"gpu\": \"%s\", \"sm_count\": %d, \"sm_clock_mhz\": %d, \"mem_clock_mhz\": %d, "
               "\"l2_bytes\": %d,\n    \"cuda_runtime\": \"%d.%d\", \"driver_cuda\": \"%d.%d\", \"commit\": \"%s\", "
               "\"date\": \"%s\",\n    \"command\": \"%s\", \"reps\": %d, \"copy_GBps\": %.1f,\n"
               "    \"method\": \"median of reps after 3 warm-ups, CUDA events, 256 MB memset between runs (untimed), "
               "GB/s = bytes that must move / time\"},\n  \"results\": [\n",
            p.name, p.multiProcessorCount, clock_khz / 1000, mem_khz / 1000, p.l2CacheSize, rt / 1000,
            (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10, o->commit, date, o->command, (int)o->reps, copy_gbps);
    for (int i = 0; i < n; i++)
        fprintf(f,
                "    {\"family\": \"membound\", \"op\": \"%s\", \"dtype\": \"%s\", \"shape\": {\"rows\": %lld, "
                "\"cols\": %lld}, \"bytes\": %.0f, \"ms\": %.5f, \"ours\": %.1f, \"reference\": %.1f, \"ref_name\": "
                "\"cudaMemcpyAsync D2D 1 GiB\", \"unit\": \"GB/s\", \"ratio\": %.4f}%s\n",
                r[i].op, r[i].dtype, (long long)r[i].rows, (long long)r[i].cols, r[i].bytes, r[i].ms, r[i].gbps,
                copy_gbps, r[i].gbps / copy_gbps, i + 1 < n ? "," : "");
    fprintf(f, "  ]\n}\n");
    fclose(f);
}

static int run_bench(const bench_opts *o) {
    const char *why = NULL;
    if (!cml_cuda_available(&why)) {
        printf("camel bench membound: skipped: %s\n", why);
        return 77;
    }
    bench b;
    memset(&b, 0, sizeof b);
    b.reps = (int)o->reps;
    setup(&b);

    /* the reference: a 1 GiB device-to-device copy (read + write) */
    void *dst = dmalloc((size_t)1 << 30);
    copy_args ca = {dst, b.x[0], (size_t)1 << 30};
    const double copy_gbps = 2.0 * (double)ca.bytes / (time_median(&b, call_copy, &ca) * 1e-3) / 1e9;
    CUDA_OK(cudaFree(dst));
    printf("copy D2D 1 GiB: %.1f GB/s (read + write)\n\n", copy_gbps);
    printf("%-24s %-5s %-14s %10s %9s %7s\n", "op", "dtype", "rows x cols", "ms", "GB/s", "%copy");

    static record rec[2 * N_SHAPES * OP_COUNT + 1];
    int nrec = 0;
    const int nshapes = o->quick ? 2 : N_SHAPES;
    for (int s = 0; s <= nshapes; s++) {
        const bool flat = s == nshapes; /* last: the 1 GiB flat f32 sum */
        const int64_t rows = flat ? 1 : SHAPES[s][0], cols = flat ? FLAT_ELEMS : SHAPES[s][1];
        if (!flat) set_targets(&b, cols);
        for (int d = 0; d < (flat ? 1 : 2); d++)
            for (int op = 0; op < (flat ? 1 : OP_COUNT); op++) {
                if (!o->want[op]) continue;
                run_args a = {op, d ? CML_BF16 : CML_F32, d, rows, cols};
                const double ms = time_median(&b, call_op, &a);
                record *r = &rec[nrec++];
                *r = (record){OP_NAMES[op], cml_dtype_name(a.dt), rows, cols,
                              op_bytes(op, rows, cols, cml_dtype_size(a.dt)), ms, 0};
                r->gbps = r->bytes / (ms * 1e-3) / 1e9;
                printf("%-24s %-5s %6lldx%-7lld %10.4f %9.1f %6.1f%%\n", r->op, r->dtype, (long long)rows,
                       (long long)cols, ms, r->gbps, 100.0 * r->gbps / copy_gbps);
                fflush(stdout);
            }
    }
    if (o->json) write_json(o->json, rec, nrec, copy_gbps, o);
    return 0;
}
#else
static int run_bench(const bench_opts *o) {
    (void)o;
    printf("camel bench membound: skipped: this camel was built without CUDA (configure with -DCML_CUDA=ON on a "
           "machine with nvcc)\n");
    return 77;
}
#endif

int cmd_bench_membound(int argc, char **argv) {
    bench_opts o;
    memset(&o, 0, sizeof o);
    o.reps = 30;
    o.commit = "unknown";
    const char *ops = NULL;
    cli_flag flags[] = {
        {"reps", CLI_INT, &o.reps, "timed calls per kernel and shape, 20..1000 (the median is reported)"},
        {"json", CLI_STRING, &o.json, "write the results (bench/results format) to this file"},
        {"commit", CLI_STRING, &o.commit, "the commit to record in the JSON's meta"},
        {"ops", CLI_STRING, &ops, "comma-separated ops to run (default: all)"},
        {"quick", CLI_BOOL, &o.quick, "the two smallest shapes only"},
    };
    int rc = cli_parse(argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), USAGE, ABOUT);
    if (rc) return rc == 1 ? 0 : rc;
    if (o.reps < 20 || o.reps > 1000) {
        fprintf(stderr, "camel: --reps=%lld must be in [20, 1000]\n", (long long)o.reps);
        return 2;
    }
    if (!parse_ops(ops, o.want)) return 2;
    snprintf(o.command, sizeof o.command, "camel bench membound");
    for (int i = 0; i < argc; i++) /* the command line as run, for the JSON's meta */
        if (strlen(o.command) + strlen(argv[i]) + 2 < sizeof o.command && !strchr(argv[i], '"')) {
            strcat(o.command, " ");
            strcat(o.command, argv[i]);
        }
    return run_bench(&o);
}
