/* camel bench membound: the memory-bound kernels (sum, softmax, layernorm,
 * rmsnorm, cross-entropy, forward and backward; the scaled fp8 conversion)
 * against the device-to-device copy bandwidth measured in the same process.
 *
 * Two measurements of every kernel and shape (--mode picks one or both):
 * - steady: back-to-back calls over K rotating sets of inputs and outputs
 *   (K = ceil(2 L2 / bytes moved per call), so the sets together are at least
 *   twice the L2 and no call finds its data there). Each timed batch of N calls
 *   is queued behind untimed 256 MB memsets that keep the GPU busy for longer
 *   than the host needs to queue the N calls, so host overhead does not show
 *   as gaps; time per call = the batch's time / N (events around the batch),
 *   median of --batches batches. This is what a kernel costs inside a stream of
 *   work: launch latency is hidden, its ramp-up and tail are not.
 * - cold: one call at a time, each after an untimed 256 MB memset (L2 holds
 *   none of its data) with events around the call, median of --reps calls:
 *   a kernel alone, its launch and ramp-up included.
 * GB/s counts the bytes that must move: each input read once, each output
 * written once. Each is compared with cudaMemcpyAsync device-to-device copies
 * measured the same way in the same process: a 1 GiB copy (%copy) and a copy
 * of the op's own byte count, half read and half written (%size, "copy at this
 * size": what a kernel of that size can reach with the same fixed costs).
 * Cross-entropy calls wait for their one 8-byte flag copy (bad targets, see
 * src/kernels/cuda/softmax/cross_entropy.cu): that wait is in their time in
 * both modes, as a caller would see it (so a steady batch of them is a chain
 * of synchronous calls). bench/torch_membound.py measures PyTorch the same way
 * and joins the two JSON files.
 *
 * CUDA runtime calls (events, buffers) are made here directly: this is a
 * benchmark of the kernel layer, not framework code. A build without CUDA
 * has the command (and its --help) but says it cannot run. */
#include <math.h>
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
    "1024x32768, 256x262144}, f32 and bf16, plus a 1 GiB flat f32 sum. convert_scaled_e4m3 is cml_convert_scaled " \
    "to f8e4m3 with a device-side scale (dtype = the input's), _amax also writes max |x|.\n\n"                      \
    "Two measurements (--mode):\n"                                                                                  \
    "  steady: back-to-back calls over rotating sets of inputs and outputs that together exceed twice the L2, "    \
    "queued behind untimed memsets so that host overhead leaves no gaps; ms = a batch's time / its calls, median " \
    "of --batches batches (launch latency hidden; ramp-up and tail included);\n"                                    \
    "  cold: one call at a time after an untimed 256 MB memset (cold L2), median of --reps calls (launch and "      \
    "ramp-up included).\n\n"                                                                                        \
    "Columns: MiB = bytes that must move (each input read once, each output written once); GB/s = those bytes / "  \
    "ms; %copy = GB/s over a 1 GiB device-to-device copy measured the same way in this process; %size = GB/s "     \
    "over a copy of the same number of bytes (half read, half written), measured the same way (\"copy at this "    \
    "size\"). Cross-entropy checks its targets on the device and reports a bad one at the next stream wait, so "   \
    "its calls do not wait (CML_SYNC_CHECKS=1 makes them wait, as a debugging aid). --json writes the "             \
    "results format of DESIGN.md (bench/torch_membound.py --combine adds PyTorch's numbers). Needs a CUDA build "  \
    "and a GPU (exit code 77 otherwise)."
#define BENCH_OPS                                                                                                   \
    "sum, softmax, softmax_bwd, layernorm, layernorm_bwd, rmsnorm, rmsnorm_bwd, cross_entropy, cross_entropy_bwd, " \
    "convert_scaled_e4m3, convert_scaled_e4m3_amax"

enum { MODE_STEADY = 1, MODE_COLD = 2 };

typedef struct bench_opts {
    int64_t reps, batches;
    int modes;
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

#define BENCH_WHO "camel bench membound"
#define BENCH_HINT "free the GPU of other work (the input and output pools take about 4.5 GiB)"
#include "bench_cuda.h"


static const int64_t SHAPES[][2] = {{4096, 1024}, {4096, 4096}, {16384, 8192}, {1024, 32768}, {256, 262144}};
enum { N_SHAPES = 5 };
#define POOL_ELEMS ((int64_t)1 << 28) /* elements of each input pool and of the output pool; the 1 GiB flat sum */
#define POOL_ROWS ((int64_t)1 << 17)  /* per-row pools (targets, mean, rstd, loss, lse, dloss) */
#define POOL_COLS ((int64_t)1 << 20)  /* per-column output pools (dgamma, dbeta) */
#define MAX_COLS 262144               /* gamma, beta: shared by the sets, as a model shares its weights */
#define FLUSH_BYTES ((size_t)256 << 20)
#define MAX_REPS 1000
#define MAX_BATCHES 50
#define BATCH_MS 1.0  /* steady: GPU time of one timed batch, roughly */
#define MAX_CALLS 400 /* steady: calls per batch at most */
#define MAX_FILLS 400 /* steady: blocking memsets before a batch at most (~35 ms) */
#define FP8_SCALE 64.0f /* x in [-3, 3) -> [-192, 192): inside e4m3's range, every exponent used */

typedef struct bench {
    cml_ctx *ctx;
    cudaStream_t st;
    cudaEvent_t ev0, ev1;
    void *flush;
    int reps, batches;
    double l2_bytes, fill_ms;
    /* input pools (random), per dtype: 0 = f32, 1 = bf16; set s of a shape starts s * rows * cols in */
    void *x[2], *dy[2], *gamma[2], *beta[2];
    void *y, *dgamma, *dbeta; /* output pools */
    float *mean, *rstd, *loss, *lse, *dloss, *scale, *amax;
    int64_t *targets;
} bench;

typedef struct run_args {
    int op;
    cml_dtype dt;
    int d; /* dtype slot */
    int64_t rows, cols;
} run_args;

/* The op on buffer set s: inputs and outputs at s times their size into the pools. */
static cml_status run_op(bench *b, const run_args *a, int s) {
    const int d = a->d;
    const size_t es = cml_dtype_size(a->dt), n = (size_t)(a->rows * a->cols);
    const void *x = (const char *)b->x[d] + (size_t)s * n * es, *dy = (const char *)b->dy[d] + (size_t)s * n * es;
    void *y = (char *)b->y + (size_t)s * n * sizeof(float); /* room for any output of the shape */
    float *mean = b->mean + s * a->rows, *rstd = b->rstd + s * a->rows, *loss = b->loss + s * a->rows;
    float *lse = b->lse + 2 * s * a->rows; /* (max, log-sum) a row */
    const float *dloss = b->dloss + s * a->rows;
    const int64_t *targets = b->targets + s * a->rows;
    void *dgamma = (float *)b->dgamma + s * a->cols, *dbeta = (float *)b->dbeta + s * a->cols;
    switch (a->op) {
    case OP_SUM: return cml_reduce(b->ctx, CML_REDUCE_SUM, y, a->dt, x, a->dt, a->rows, a->cols, 1, 0);
    case OP_SOFTMAX: return cml_softmax_fwd(b->ctx, y, x, a->rows, a->cols, 1, a->dt, false);
    case OP_SOFTMAX_BWD: return cml_softmax_bwd(b->ctx, y, dy, x, a->rows, a->cols, 1, a->dt, false);
    case OP_LAYERNORM:
        return cml_layernorm_fwd(b->ctx, y, mean, rstd, x, b->gamma[d], b->beta[d], a->rows, a->cols, 1e-5f, a->dt);
    case OP_LAYERNORM_BWD:
        return cml_layernorm_bwd(b->ctx, y, dgamma, dbeta, dy, x, b->gamma[d], mean, rstd, a->rows, a->cols, a->dt);
    case OP_RMSNORM: return cml_rmsnorm_fwd(b->ctx, y, rstd, x, b->gamma[d], a->rows, a->cols, 1e-5f, a->dt);
    case OP_RMSNORM_BWD: return cml_rmsnorm_bwd(b->ctx, y, dgamma, dy, x, b->gamma[d], rstd, a->rows, a->cols, a->dt);
    /* as the framework calls them: the forward's logsumexp goes to the backward */
    case OP_CE: return cml_cross_entropy_fwd(b->ctx, loss, lse, x, targets, a->rows, a->cols, a->dt, -100);
    case OP_CE_BWD: return cml_cross_entropy_bwd(b->ctx, y, dloss, x, lse, targets, a->rows, a->cols, a->dt, -100);
    default:
        return cml_convert_scaled(b->ctx, y, CML_F8E4M3, x, a->dt, a->rows * a->cols, b->scale,
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
    case OP_CE: return rc + 20 * r;                       /* logits, targets (i64), loss, lse (2 f32) */
    case OP_CE_BWD: return 2 * rc + 20 * r;               /* logits, dlogits, targets, dloss, lse */
    case OP_FP8: return rc + n + 4;                       /* x, y (1 byte each), scale */
    default: return rc + n + 8;                           /* x, y, scale, amax */
    }
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static float median(float *t, int n) {
    qsort(t, (size_t)n, sizeof t[0], cmp_float);
    return n % 2 ? t[n / 2] : 0.5f * (t[n / 2 - 1] + t[n / 2]);
}

/* fn(b, arg, s) runs the measured call on buffer set s. */
typedef void (*call_fn)(bench *b, const void *arg, int set);

/* cold: median milliseconds of `reps` calls on set 0, each after an untimed L2 flush. */
static float time_cold(bench *b, call_fn fn, const void *arg) {
    float t[MAX_REPS];
    for (int i = 0; i < 3; i++) fn(b, arg, 0);
    for (int i = 0; i < b->reps; i++) {
        BENCH_CUDA_OK(cudaMemsetAsync(b->flush, i & 0xFF, FLUSH_BYTES, b->st));
        BENCH_CUDA_OK(cudaEventRecord(b->ev0, b->st));
        fn(b, arg, 0);
        BENCH_CUDA_OK(cudaEventRecord(b->ev1, b->st));
        BENCH_CUDA_OK(cudaEventSynchronize(b->ev1));
        BENCH_CUDA_OK(cudaEventElapsedTime(&t[i], b->ev0, b->ev1));
    }
    return median(t, b->reps);
}

/* Keeps the GPU busy for about ms with untimed memsets of the flush buffer. */
static void block_stream(bench *b, double ms) {
    int f = (int)ceil(ms / b->fill_ms);
    if (f < 1) f = 1;
    if (f > MAX_FILLS) f = MAX_FILLS;
    for (int i = 0; i < f; i++) BENCH_CUDA_OK(cudaMemsetAsync(b->flush, i & 0xFF, FLUSH_BYTES, b->st));
}

typedef struct steady_info {
    int sets, calls;
} steady_info;

/* steady: median over batches of (batch time / calls), calls rotating over `sets` buffer sets;
 * est_ms (a guess of one call's time) sizes the batch. */
static float time_steady(bench *b, call_fn fn, const void *arg, int sets, double est_ms, steady_info *info) {
    for (int s = 0; s < sets; s++) fn(b, arg, s); /* warm-up: every set once */
    BENCH_CUDA_OK(cudaStreamSynchronize(b->st));
    /* host time to queue one call (the GPU is idle, so only a synchronous op waits here) */
    const int probe = sets > 4 ? sets : 4;
    const double h0 = cli_now();
    for (int i = 0; i < probe; i++) fn(b, arg, i % sets);
    const double host_ms = (cli_now() - h0) * 1e3 / probe;
    BENCH_CUDA_OK(cudaStreamSynchronize(b->st));
    int calls = (int)ceil(BATCH_MS / (est_ms > 1e-4 ? est_ms : 1e-4));
    if (calls < 2 * sets) calls = 2 * sets;
    calls = (calls + sets - 1) / sets * sets;
    if (calls > MAX_CALLS) calls = MAX_CALLS;
    float t[MAX_BATCHES];
    for (int k = 0; k < b->batches; k++) {
        block_stream(b, 1.5 * calls * host_ms + 0.05);
        BENCH_CUDA_OK(cudaEventRecord(b->ev0, b->st));
        for (int i = 0; i < calls; i++) fn(b, arg, i % sets);
        BENCH_CUDA_OK(cudaEventRecord(b->ev1, b->st));
        BENCH_CUDA_OK(cudaEventSynchronize(b->ev1));
        BENCH_CUDA_OK(cudaEventElapsedTime(&t[k], b->ev0, b->ev1));
        t[k] /= (float)calls;
    }
    info->sets = sets;
    info->calls = calls;
    return median(t, b->batches);
}

static void call_op(bench *b, const void *arg, int set) { BENCH_CML_OK(run_op(b, (const run_args *)arg, set)); }

/* A device-to-device copy of `bytes` (a multiple of 16) per call; set s at s * bytes into the pools. */
static void call_copy(bench *b, const void *arg, int set) {
    const size_t bytes = *(const size_t *)arg;
    BENCH_CUDA_OK(cudaMemcpyAsync((char *)b->y + (size_t)set * bytes, (const char *)b->x[0] + (size_t)set * bytes, bytes,
                            cudaMemcpyDeviceToDevice, b->st));
}

/* Sets for a call moving `bytes` with `per_set` bytes of pool each: enough to exceed twice the L2,
 * at most what the pools hold. */
static int n_sets(const bench *b, double bytes, double per_set, double pool) {
    int k = (int)ceil(2.0 * b->l2_bytes / bytes);
    const int cap = (int)(pool / per_set);
    if (k > cap) k = cap;
    return k < 1 ? 1 : k;
}

static int op_sets(const bench *b, const run_args *a, double bytes) {
    int k = n_sets(b, bytes, (double)(a->rows * a->cols), (double)POOL_ELEMS);
    while (k > 1 && (k * a->rows > POOL_ROWS || k * a->cols > POOL_COLS)) k--;
    return k;
}

/* ---- the copy references, measured once per byte count ----------------------------------------------- */

typedef struct copy_ref {
    double bytes, steady_gbps, cold_gbps;
} copy_ref;

/* Copies moving `bytes` (read + written) measured in the wanted modes (0 where not measured). */
static copy_ref copy_at(bench *b, double bytes, int modes) {
    static copy_ref cache[128];
    static int ncache;
    for (int i = 0; i < ncache; i++)
        if (cache[i].bytes == bytes) return cache[i];
    size_t half = (size_t)(bytes / 2) / 16 * 16;
    if (half < 16) half = 16;
    copy_ref r = {bytes, 0, 0};
    if (modes & MODE_COLD) r.cold_gbps = 2.0 * (double)half / (time_cold(b, call_copy, &half) * 1e-3) / 1e9;
    if (modes & MODE_STEADY) {
        steady_info info;
        const int sets = n_sets(b, 2.0 * (double)half, (double)half, (double)POOL_ELEMS * sizeof(float));
        const double est = 2.0 * (double)half / 2.5e12 * 1e3 + 0.003;
        r.steady_gbps = 2.0 * (double)half / (time_steady(b, call_copy, &half, sets, est, &info) * 1e-3) / 1e9;
    }
    if (ncache < 128) cache[ncache++] = r;
    return r;
}

/* ---- set-up ---------------------------------------------------------------------------------- */

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
        BENCH_CUDA_OK(cudaMemcpy(dst + i, h, sizeof(float) * (size_t)(n - i < block ? n - i : block), cudaMemcpyHostToDevice));
    free(h);
}

static void to_bf16(bench *b, void *dst, const void *src, int64_t n) {
    cml_layout l = {1, {n}, {1}};
    BENCH_CML_OK(cml_copy(b->ctx, dst, &l, CML_BF16, src, &l, CML_F32));
}

static void setup(bench *b) {
    cml_device dev = {CML_CUDA, 0};
    b->ctx = cml_ctx_default(dev);
    if (!b->ctx) {
        fprintf(stderr, "camel bench membound: no CUDA context: %s\n", cml_last_error());
        exit(1);
    }
    b->st = (cudaStream_t)cml_ctx_stream(b->ctx);
    BENCH_CUDA_OK(cudaEventCreate(&b->ev0));
    BENCH_CUDA_OK(cudaEventCreate(&b->ev1));
    int l2 = 0;
    BENCH_CUDA_OK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    b->l2_bytes = l2 > 0 ? (double)l2 : 50e6;
    b->flush = bench_dmalloc(FLUSH_BYTES);
    b->x[0] = bench_dmalloc(sizeof(float) * (size_t)POOL_ELEMS); /* also the flat 1 GiB sum's input */
    b->dy[0] = bench_dmalloc(sizeof(float) * (size_t)POOL_ELEMS);
    b->x[1] = bench_dmalloc(2 * (size_t)POOL_ELEMS);
    b->dy[1] = bench_dmalloc(2 * (size_t)POOL_ELEMS);
    b->y = bench_dmalloc(sizeof(float) * (size_t)POOL_ELEMS);
    fill_random_f32(b->x[0], POOL_ELEMS, 1, -3.0f, 3.0f);
    fill_random_f32(b->dy[0], POOL_ELEMS, 2, -1.0f, 1.0f);
    to_bf16(b, b->x[1], b->x[0], POOL_ELEMS);
    to_bf16(b, b->dy[1], b->dy[0], POOL_ELEMS);
    for (int d = 0; d < 2; d++) {
        b->gamma[d] = bench_dmalloc(sizeof(float) * MAX_COLS);
        b->beta[d] = bench_dmalloc(sizeof(float) * MAX_COLS);
    }
    fill_random_f32(b->gamma[0], MAX_COLS, 3, 0.5f, 1.5f);
    fill_random_f32(b->beta[0], MAX_COLS, 4, -0.5f, 0.5f);
    to_bf16(b, b->gamma[1], b->gamma[0], MAX_COLS);
    to_bf16(b, b->beta[1], b->beta[0], MAX_COLS);
    b->dgamma = bench_dmalloc(sizeof(float) * POOL_COLS);
    b->dbeta = bench_dmalloc(sizeof(float) * POOL_COLS);
    b->mean = bench_dmalloc(sizeof(float) * POOL_ROWS);
    b->rstd = bench_dmalloc(sizeof(float) * POOL_ROWS);
    b->loss = bench_dmalloc(sizeof(float) * POOL_ROWS);
    b->lse = bench_dmalloc(2 * sizeof(float) * POOL_ROWS);
    b->dloss = bench_dmalloc(sizeof(float) * POOL_ROWS);
    b->targets = bench_dmalloc(sizeof(int64_t) * POOL_ROWS);
    b->scale = bench_dmalloc(2 * sizeof(float));
    b->amax = b->scale + 1;
    fill_random_f32(b->mean, POOL_ROWS, 5, -0.1f, 0.1f);
    fill_random_f32(b->rstd, POOL_ROWS, 6, 0.5f, 2.0f);
    fill_random_f32(b->dloss, POOL_ROWS, 7, 0.5f, 1.5f);
    fill_random_f32(b->lse, 2 * POOL_ROWS, 8, 1.0f, 12.0f); /* max / log-sum-like, until a forward writes them */
    const float scale = FP8_SCALE;
    BENCH_CUDA_OK(cudaMemcpy(b->scale, &scale, sizeof scale, cudaMemcpyHostToDevice));
    BENCH_CUDA_OK(cudaDeviceSynchronize());
    /* one 256 MB memset's time, for block_stream */
    for (int i = 0; i < 2; i++) BENCH_CUDA_OK(cudaMemsetAsync(b->flush, 0, FLUSH_BYTES, b->st));
    BENCH_CUDA_OK(cudaEventRecord(b->ev0, b->st));
    for (int i = 0; i < 8; i++) BENCH_CUDA_OK(cudaMemsetAsync(b->flush, i, FLUSH_BYTES, b->st));
    BENCH_CUDA_OK(cudaEventRecord(b->ev1, b->st));
    BENCH_CUDA_OK(cudaEventSynchronize(b->ev1));
    float ms = 0;
    BENCH_CUDA_OK(cudaEventElapsedTime(&ms, b->ev0, b->ev1));
    b->fill_ms = ms / 8 > 0.01 ? ms / 8 : 0.01;
}

/* Random targets in [0, cols) for every set of the next shape. */
static void set_targets(bench *b, int64_t cols) {
    static int64_t h[POOL_ROWS];
    uint64_t s = 0x12345678ull + (uint64_t)cols;
    for (int i = 0; i < POOL_ROWS; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        h[i] = (int64_t)((s * 0x2545F4914F6CDD1Dull >> 33) % (uint64_t)cols);
    }
    BENCH_CUDA_OK(cudaMemcpy(b->targets, h, sizeof h, cudaMemcpyHostToDevice));
}

/* ---- output ------------------------------------------------------------------------------------ */

typedef struct record {
    const char *op;
    const char *dtype;
    int64_t rows, cols;
    double bytes;
    double ms, gbps, size_gbps; /* steady: the op, and the copy of the same byte count */
    double cold_ms, cold_gbps, cold_size_gbps;
    int sets, calls;
} record;

/* ", key: v" with `digits` decimals, or null where v was not measured (0). */
static void json_num(FILE *f, const char *key, double v, int digits) {
    fprintf(f, ", \"%s\": ", key);
    if (v > 0) fprintf(f, "%.*f", digits, v);
    else fprintf(f, "null");
}

static void write_json(const char *path, const record *r, int n, copy_ref copy1g, const bench_opts *o,
                       const bench *b) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "camel bench membound: cannot write %s\n", path);
        exit(1);
    }
    struct cudaDeviceProp p;
    BENCH_CUDA_OK(cudaGetDeviceProperties(&p, 0));
    int clock_khz = 0, mem_khz = 0, rt = 0, drv = 0;
    BENCH_CUDA_OK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    BENCH_CUDA_OK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0));
    BENCH_CUDA_OK(cudaRuntimeGetVersion(&rt));
    BENCH_CUDA_OK(cudaDriverGetVersion(&drv));
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    const bool steady = o->modes & MODE_STEADY;
    const double copy = steady ? copy1g.steady_gbps : copy1g.cold_gbps;
    fprintf(f,
            "{\n  \"meta\": {\"gpu\": \"%s\", \"sm_count\": %d, \"sm_clock_mhz\": %d, \"mem_clock_mhz\": %d, "
            "\"l2_bytes\": %d,\n    \"cuda_runtime\": \"%d.%d\", \"driver_cuda\": \"%d.%d\", \"commit\": \"%s\", "
            "\"date\": \"%s\",\n    \"command\": \"%s\", \"reps\": %d, \"batches\": %d, \"mode\": \"%s\", "
            "\"copy_GBps\": %.1f",
            p.name, p.multiProcessorCount, clock_khz / 1000, mem_khz / 1000, p.l2CacheSize, rt / 1000,
            (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10, o->commit, date, o->command, b->reps, b->batches,
            steady ? "steady" : "cold", copy);
    json_num(f, "copy_steady_GBps", copy1g.steady_gbps, 1);
    json_num(f, "copy_cold_GBps", copy1g.cold_gbps, 1);
    fprintf(f, ",\n    \"method\": \"steady: back-to-back calls over rotating input/output sets totalling >= 2x L2, "
               "queued behind untimed memsets, batch time / calls, median of batches; cold: one call after an "
               "untimed 256 MB memset, median of reps; CUDA events; GB/s = bytes that must move / time; "
               "copy_size = a D2D copy of the same byte count measured the same way; ours/ms/ratio are the %s "
               "numbers\"},\n  \"results\": [\n",
            steady ? "steady" : "cold");
    for (int i = 0; i < n; i++) {
        const double ours = steady ? r[i].gbps : r[i].cold_gbps, ms = steady ? r[i].ms : r[i].cold_ms;
        const double size = steady ? r[i].size_gbps : r[i].cold_size_gbps;
        fprintf(f,
                "    {\"family\": \"membound\", \"op\": \"%s\", \"dtype\": \"%s\", \"shape\": {\"rows\": %lld, "
                "\"cols\": %lld}, \"bytes\": %.0f, \"mode\": \"%s\", \"ms\": %.5f, \"ours\": %.1f, \"reference\": "
                "%.1f, \"ref_name\": \"cudaMemcpyAsync D2D 1 GiB\", \"unit\": \"GB/s\", \"ratio\": %.4f, "
                "\"copy_size_GBps\": %.1f, \"size_ratio\": %.4f",
                r[i].op, r[i].dtype, (long long)r[i].rows, (long long)r[i].cols, r[i].bytes,
                steady ? "steady" : "cold", ms, ours, copy, ours / copy, size, ours / size);
        if (steady) fprintf(f, ", \"sets\": %d, \"calls\": %d", r[i].sets, r[i].calls);
        json_num(f, "cold_ms", r[i].cold_ms, 5);
        json_num(f, "cold_GBps", r[i].cold_gbps, 1);
        json_num(f, "cold_copy_size_GBps", r[i].cold_size_gbps, 1);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
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
    b.batches = (int)o->batches;
    setup(&b);
    const bool steady = o->modes & MODE_STEADY, cold = o->modes & MODE_COLD;

    /* the reference: a 1 GiB device-to-device copy (read + write) */
    const copy_ref copy1g = copy_at(&b, 2.0 * (double)((size_t)1 << 30), o->modes);
    printf("copy D2D 1 GiB (read + write):");
    if (steady) printf(" steady %.1f GB/s", copy1g.steady_gbps);
    if (cold) printf(" cold %.1f GB/s", copy1g.cold_gbps);
    printf("\n\n%-24s %-5s %-14s %5s", "op", "dtype", "rows x cols", "MiB");
    if (steady) printf(" | %9s %7s %6s %6s %4s", "steady ms", "GB/s", "%copy", "%size", "sets");
    if (cold) printf(" | %9s %7s %6s %6s", "cold ms", "GB/s", "%copy", "%size");
    printf("\n");

    static record rec[2 * N_SHAPES * OP_COUNT + 1];
    int nrec = 0;
    const int nshapes = o->quick ? 2 : N_SHAPES;
    for (int s = 0; s <= nshapes; s++) {
        const bool flat = s == nshapes; /* last: the 1 GiB flat f32 sum */
        const int64_t rows = flat ? 1 : SHAPES[s][0], cols = flat ? POOL_ELEMS : SHAPES[s][1];
        if (!flat) set_targets(&b, cols);
        for (int d = 0; d < (flat ? 1 : 2); d++)
            for (int op = 0; op < (flat ? 1 : OP_COUNT); op++) {
                if (!o->want[op]) continue;
                run_args a = {op, d ? CML_BF16 : CML_F32, d, rows, cols};
                record *r = &rec[nrec++];
                memset(r, 0, sizeof *r);
                r->op = OP_NAMES[op];
                r->dtype = cml_dtype_name(a.dt);
                r->rows = rows, r->cols = cols;
                r->bytes = op_bytes(op, rows, cols, cml_dtype_size(a.dt));
                const copy_ref cr = copy_at(&b, r->bytes, o->modes);
                if (cold) {
                    r->cold_ms = time_cold(&b, call_op, &a);
                    r->cold_gbps = r->bytes / (r->cold_ms * 1e-3) / 1e9;
                    r->cold_size_gbps = cr.cold_gbps;
                }
                if (steady) {
                    steady_info info;
                    const double est = cold ? r->cold_ms : r->bytes / 2.5e12 * 1e3 + 0.003;
                    r->ms = time_steady(&b, call_op, &a, op_sets(&b, &a, r->bytes), est, &info);
                    r->gbps = r->bytes / (r->ms * 1e-3) / 1e9;
                    r->size_gbps = cr.steady_gbps;
                    r->sets = info.sets, r->calls = info.calls;
                }
                printf("%-24s %-5s %6lldx%-7lld %5.0f", r->op, r->dtype, (long long)rows, (long long)cols,
                       r->bytes / 1048576.0);
                if (steady)
                    printf(" | %9.4f %7.1f %5.1f%% %5.1f%% %4d", r->ms, r->gbps, 100.0 * r->gbps / copy1g.steady_gbps,
                           100.0 * r->gbps / r->size_gbps, r->sets);
                if (cold)
                    printf(" | %9.4f %7.1f %5.1f%% %5.1f%%", r->cold_ms, r->cold_gbps,
                           100.0 * r->cold_gbps / copy1g.cold_gbps, 100.0 * r->cold_gbps / r->cold_size_gbps);
                printf("\n");
                fflush(stdout);
            }
    }
    if (o->json) write_json(o->json, rec, nrec, copy1g, o, &b);
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
    o.batches = 7;
    o.commit = "unknown";
    const char *ops = NULL, *mode = "both";
    cli_flag flags[] = {
        {"mode", CLI_STRING, &mode, "steady, cold or both (default): see above"},
        {"reps", CLI_INT, &o.reps, "cold: timed calls per kernel and shape, 20..1000 (the median is reported)"},
        {"batches", CLI_INT, &o.batches, "steady: timed batches per kernel and shape, 3..50 (the median is reported)"},
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
    if (o.batches < 3 || o.batches > 50) {
        fprintf(stderr, "camel: --batches=%lld must be in [3, 50]\n", (long long)o.batches);
        return 2;
    }
    if (strcmp(mode, "steady") == 0) o.modes = MODE_STEADY;
    else if (strcmp(mode, "cold") == 0) o.modes = MODE_COLD;
    else if (strcmp(mode, "both") == 0) o.modes = MODE_STEADY | MODE_COLD;
    else {
        fprintf(stderr, "camel: --mode=%s: the modes are steady, cold and both\n", mode);
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
