/* camel bench attention: cml_attention_fwd and cml_attention_fwd + cml_attention_bwd
 * in TFLOP/s, and a constant-time check (fixed vs random inputs, Welch's t).
 *
 * Throughput (DESIGN.md section 5; issue 6 item 6): bf16 [B, S, H, D] tensors
 * (contiguous, cml_attention_desc_bshd, scale 1/sqrt(D)) of random values
 * (uniform in [-sqrt 3, sqrt 3): variance 1; never zeros), B * S = --tokens
 * (16384), H = --hidden / D (2048 / D), for D in --d, S in --s, causal and not.
 * Forward flops 4 B H S^2 D, halved when causal; the backward counts 2.5x the
 * forward, so fwd+bwd is 3.5x. For each case 3 warm-up calls, then --reps timed
 * calls (fewer when --max-case-seconds would be exceeded; the record says how
 * many), each after an untimed 256 MiB memset (an L2 flush), CUDA events on the
 * context's stream around the public call(s); the median is reported. Before
 * timing, each case checks once that every output element was written: outputs
 * poisoned with NaN, one call, then a sum of each output must be finite.
 * Combinations the library rejects (its first call returns an error before any
 * work) are listed as skipped with the library's message.
 * bench/torch_attention.py measures PyTorch SDPA (FlashAttention-2 and cuDNN
 * backends) the same way and joins the two JSON files.
 *
 * Constant time (--timing-check; issue 6 item 5): for one shape (--tc-shape,
 * default B=4, S=2048, H=16, D=128), causal and not, forward and backward,
 * --tc-runs timed runs split evenly between two classes in a random order:
 * "fixed" (the same inputs every run) and "random" (fresh inputs every run:
 * windows at random offsets of pools of random values, one pool per tensor,
 * generated on the device before timing). Both classes are treated the same:
 * before every run its inputs are copied into the same input buffers (the
 * backward also runs the forward, untimed, for O and lse), then L2 is flushed,
 * then the call is timed with CUDA events. Welch's t over the two sets of times
 * is reported, on all runs and on the runs at or under the pooled 95th
 * percentile (noise from outliers removed); |t| < 4.5 means no detectable data
 * dependence. A positive control shows that the test can see a difference: the
 * forward followed, inside the timed region, by an 8 MiB memset only when the
 * run's first query element is negative (a data-dependent branch). This is a
 * report, not a pass/fail test.
 *
 * CUDA runtime calls (events, buffers) are made here directly: this is a
 * benchmark of the kernel layer, not framework code. A build without CUDA, or
 * a machine without a usable GPU, gets a message and exit code 77. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "camel/camel.h"
#include "cli.h"

#define USAGE "camel bench attention [options]"
#define ABOUT                                                                                                         \
    "Times cml_attention_fwd and cml_attention_fwd + cml_attention_bwd on bf16 [B, S, H, D] tensors of random data: " \
    "B*S = --tokens, H = --hidden / D, for each D in --d and S in --s, causal and non-causal. TFLOP/s with forward "  \
    "flops 4*B*H*S^2*D (halved when causal) and fwd+bwd 3.5x that. Median of --reps calls after 3 warm-ups, CUDA "    \
    "events, each call after an untimed 256 MiB memset (cold L2). Combinations the library rejects are listed as "    \
    "skipped with its message. Prints a table; --json writes the results format of DESIGN.md "                        \
    "(bench/torch_attention.py --combine adds PyTorch SDPA's FlashAttention-2 and cuDNN numbers).\n\n"                \
    "--timing-check instead runs the constant-time check: thousands of interleaved runs on fixed vs fresh random "    \
    "inputs of one shape (--tc-shape), forward and backward, causal and not, plus a positive control with a "         \
    "data-dependent branch; reports Welch's t (|t| < 4.5: no detectable data dependence).\n\n"                        \
    "Needs a CUDA build and a GPU (exit code 77 otherwise)."

#define MAX_LIST 16
#define MAX_REPS 1000
#define WARMUP 3
#define FLUSH_BYTES ((size_t)256 << 20)
#define CONTROL_BYTES ((size_t)8 << 20)

typedef struct att_opts {
    int64_t reps, tokens, hidden, tc_runs;
    double max_case_seconds;
    bool quick, timing_check;
    int64_t d[MAX_LIST], s[MAX_LIST], tc_shape[4];
    int nd, ns;
    bool causal_mode[2]; /* [0]: non-causal, [1]: causal */
    const char *json, *commit;
    char command[512];
} att_opts;

/* Comma-separated positive integers; the count, or -1 on a bad word or too many. */
static int parse_ints(const char *text, int64_t *out, int max) {
    int n = 0;
    for (const char *p = text; *p;) {
        char *end = NULL;
        long long v = strtoll(p, &end, 10);
        if (end == p || v <= 0 || n == max || (*end && *end != ',')) return -1;
        out[n++] = v;
        p = *end ? end + 1 : end;
    }
    return n;
}

static bool parse_causal(const char *text, bool mode[2]) {
    if (strcmp(text, "both") == 0) mode[0] = mode[1] = true;
    else if (strcmp(text, "yes") == 0 || strcmp(text, "1") == 0 || strcmp(text, "true") == 0) mode[1] = true;
    else if (strcmp(text, "no") == 0 || strcmp(text, "0") == 0 || strcmp(text, "false") == 0) mode[0] = true;
    else return false;
    return true;
}

#ifdef CML_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "runtime/ctx_impl.h"

#define BENCH_WHO "camel bench attention"
#define BENCH_HINT "choose a smaller --tokens or --hidden"
#include "bench_cuda.h"

/* ---- statistics (used by the timing check; plain C) ------------------------------------------- */

typedef struct welch {
    int64_t n[2];
    double mean[2], sd[2], t;
} welch;

/* Welch's t of x[i] for the runs with cls[i] == 1 ("random") against cls[i] == 0 ("fixed"),
 * over the runs with x[i] <= limit. t is NAN when a class has fewer than 2 runs. */
static welch welch_t(const double *x, const unsigned char *cls, int64_t n, double limit) {
    welch w;
    memset(&w, 0, sizeof w);
    double sum[2] = {0, 0}, sq[2] = {0, 0};
    for (int64_t i = 0; i < n; i++)
        if (x[i] <= limit) w.n[cls[i]]++, sum[cls[i]] += x[i];
    for (int c = 0; c < 2; c++) w.mean[c] = w.n[c] ? sum[c] / (double)w.n[c] : NAN;
    for (int64_t i = 0; i < n; i++)
        if (x[i] <= limit) sq[cls[i]] += (x[i] - w.mean[cls[i]]) * (x[i] - w.mean[cls[i]]);
    for (int c = 0; c < 2; c++) w.sd[c] = w.n[c] > 1 ? sqrt(sq[c] / (double)(w.n[c] - 1)) : NAN;
    if (w.n[0] < 2 || w.n[1] < 2) {
        w.t = NAN;
        return w;
    }
    const double se = sqrt(w.sd[0] * w.sd[0] / (double)w.n[0] + w.sd[1] * w.sd[1] / (double)w.n[1]);
    w.t = se > 0 ? (w.mean[1] - w.mean[0]) / se : (w.mean[1] == w.mean[0] ? 0.0 : INFINITY);
    return w;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of n values (nearest rank), sorting a copy. */
static double quantile(const double *x, int64_t n, double q) {
    double *c = malloc(sizeof(double) * (size_t)n);
    if (!c) return INFINITY;
    memcpy(c, x, sizeof(double) * (size_t)n);
    qsort(c, (size_t)n, sizeof c[0], cmp_double);
    int64_t k = (int64_t)ceil(q * (double)n) - 1;
    double v = c[k < 0 ? 0 : k >= n ? n - 1 : k];
    free(c);
    return v;
}


typedef struct bench {
    cml_ctx *ctx;
    cudaStream_t st;
    cudaEvent_t ev0, ev1;
    void *flush, *sum;
    /* inputs (random) and outputs, sized for the largest case */
    void *Q, *K, *V, *dO, *O, *dQ, *dK, *dV;
    float *lse;
} bench;

/* n bf16 values, uniform in [-sqrt 3, sqrt 3) (variance 1, never exactly zero), from a xorshift64*
 * stream of `seed`, written to the device 16M at a time. */
static void fill_random_bf16(void *dst, int64_t n, uint64_t seed) {
    const int64_t block = (int64_t)1 << 24;
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)block);
    if (!h) {
        fprintf(stderr, "camel bench attention: out of host memory\n");
        exit(1);
    }
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    for (int64_t i = 0; i < n; i += block) {
        const int64_t m = n - i < block ? n - i : block;
        for (int64_t k = 0; k < m; k++) {
            s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
            float u = ((float)((s * 0x2545F4914F6CDD1Dull) >> 40) + 0.5f) * (1.0f / 16777216.0f); /* (0, 1) */
            float v = 1.7320508f * (2.0f * u - 1.0f);
            if (v == 0.0f) v = 0.5f;
            uint32_t bits;
            memcpy(&bits, &v, sizeof bits);
            h[k] = (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16); /* round to nearest even */
        }
        BENCH_CUDA_OK(cudaMemcpy((uint16_t *)dst + i, h, sizeof(uint16_t) * (size_t)m, cudaMemcpyHostToDevice));
    }
    free(h);
}

static bool gpu_ready(const char *what) {
    const char *why = NULL;
    if (!cml_cuda_available(&why)) {
        printf("camel bench attention%s: skipped: %s\n", what, why ? why : "no usable CUDA device");
        return false;
    }
    return true;
}

/* elems: the most elements of one [B, S, H, D] tensor; rows: of lse (B H S). */
static bool setup(bench *b, int64_t elems, int64_t rows) {
    memset(b, 0, sizeof *b);
    b->ctx = cml_ctx_default((cml_device){CML_CUDA, 0});
    if (!b->ctx) {
        cli_fail("creating the CUDA context", "is a GPU visible? (nvidia-smi)");
        return false;
    }
    b->st = (cudaStream_t)cml_ctx_stream(b->ctx);
    BENCH_CUDA_OK(cudaEventCreate(&b->ev0));
    BENCH_CUDA_OK(cudaEventCreate(&b->ev1));
    b->flush = bench_dmalloc(FLUSH_BYTES);
    b->sum = bench_dmalloc(64);
    const size_t bytes = 2 * (size_t)elems;
    void **bufs[8] = {&b->Q, &b->K, &b->V, &b->dO, &b->O, &b->dQ, &b->dK, &b->dV};
    for (int i = 0; i < 8; i++) *bufs[i] = bench_dmalloc(bytes);
    b->lse = bench_dmalloc(sizeof(float) * (size_t)rows);
    for (int i = 0; i < 4; i++) fill_random_bf16(*bufs[i], elems, 101 + (uint64_t)i);
    BENCH_CUDA_OK(cudaDeviceSynchronize());
    return true;
}

static void flush_l2(bench *b, int i) { BENCH_CUDA_OK(cudaMemsetAsync(b->flush, i & 0xFF, FLUSH_BYTES, b->st)); }

static cml_status call_fwd(bench *b, const cml_attention_desc *d) {
    return cml_attention_fwd(b->ctx, d, b->O, b->lse, b->Q, b->K, b->V);
}

static cml_status call_bwd(bench *b, const cml_attention_desc *d) {
    return cml_attention_bwd(b->ctx, d, b->dQ, b->dK, b->dV, b->dO, b->Q, b->K, b->V, b->O, b->lse);
}

static cml_status call_fwd_bwd(bench *b, const cml_attention_desc *d) {
    cml_status s = call_fwd(b, d);
    return s != CML_OK ? s : call_bwd(b, d);
}

static double elapsed_ms(bench *b) {
    float ms = 0;
    BENCH_CUDA_OK(cudaEventSynchronize(b->ev1));
    BENCH_CUDA_OK(cudaEventElapsedTime(&ms, b->ev0, b->ev1));
    return ms;
}

/* Whether the n bf16 elements at p are all finite (their sum is: NaN or inf would spread). */
static bool all_finite(bench *b, const void *p, int64_t n) {
    BENCH_CML_OK(cml_reduce(b->ctx, CML_REDUCE_SUM, b->sum, CML_BF16, p, CML_BF16, 1, n, 1, 0));
    uint16_t h = 0;
    BENCH_CUDA_OK(cudaStreamSynchronize(b->st));
    BENCH_CUDA_OK(cudaMemcpy(&h, b->sum, sizeof h, cudaMemcpyDeviceToHost));
    return isfinite(cml_dtype_load(&h, CML_BF16, 0));
}

/* ---- throughput ---------------------------------------------------------------------------------- */

enum { OP_FWD, OP_FWD_BWD, N_OPS };
static const char *const OP_NAME[N_OPS] = {"fwd", "fwd_bwd"};

typedef struct record {
    int64_t B, S, H, D;
    bool causal;
    double flop[N_OPS], ms[N_OPS], ms_min[N_OPS], tflops[N_OPS];
    int reps[N_OPS];
    char skipped[N_OPS][240]; /* the library's message when it rejects the combination */
    char error[N_OPS][240];   /* a failure after the first call succeeded */
} record;

static double fwd_flop(const record *r) {
    return 4.0 * (double)r->B * (double)r->H * (double)r->S * (double)r->S * (double)r->D * (r->causal ? 0.5 : 1.0);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Times op on the case: a first (checked) call on poisoned outputs, WARMUP more, then the timed calls. */
static void time_op(bench *b, const att_opts *o, const cml_attention_desc *d, int op, record *r) {
    const int64_t n = d->B * d->S_q * d->H_q * d->D;
    cml_status (*fn)(bench *, const cml_attention_desc *) = op == OP_FWD ? call_fwd : call_fwd_bwd;
    /* outputs poisoned: 0xFF bytes are NaN in bf16 (and in the f32 lse) */
    void *outs[4] = {b->O, b->dQ, b->dK, b->dV};
    for (int i = 0; i < (op == OP_FWD ? 1 : 4); i++) BENCH_CUDA_OK(cudaMemsetAsync(outs[i], 0xFF, 2 * (size_t)n, b->st));
    const cml_status first = fn(b, d);
    if (first == CML_ERR_UNSUPPORTED || first == CML_ERR_INVALID_ARG || first == CML_ERR_DTYPE ||
        first == CML_ERR_SHAPE) { /* the library rejects the combination */
        snprintf(r->skipped[op], sizeof r->skipped[op], "%s", cml_last_error());
        return;
    }
    if (first != CML_OK) {
        snprintf(r->error[op], sizeof r->error[op], "first call: %s", cml_last_error());
        return;
    }
    BENCH_CUDA_OK(cudaStreamSynchronize(b->st));
    for (int i = 0; i < (op == OP_FWD ? 1 : 4); i++)
        if (!all_finite(b, outs[i], n)) {
            snprintf(r->error[op], sizeof r->error[op], "%s has non-finite values after one call (unwritten?)",
                     i == 0 ? "O" : i == 1 ? "dQ" : i == 2 ? "dK" : "dV");
            return;
        }
    double t0 = cli_now();
    for (int i = 0; i < WARMUP; i++)
        if (fn(b, d) != CML_OK) {
            snprintf(r->error[op], sizeof r->error[op], "warm-up call: %s", cml_last_error());
            return;
        }
    BENCH_CUDA_OK(cudaStreamSynchronize(b->st));
    const double per_call = (cli_now() - t0) / WARMUP;
    int reps = (int)o->reps;
    if (per_call * reps > o->max_case_seconds) {
        int cap = (int)(o->max_case_seconds / per_call);
        reps = cap < 5 ? 5 : cap < reps ? cap : reps;
    }
    float t[MAX_REPS];
    for (int i = 0; i < reps; i++) {
        flush_l2(b, i);
        BENCH_CUDA_OK(cudaEventRecord(b->ev0, b->st));
        cml_status s = fn(b, d);
        BENCH_CUDA_OK(cudaEventRecord(b->ev1, b->st));
        if (s != CML_OK) {
            snprintf(r->error[op], sizeof r->error[op], "timed call %d: %s", i, cml_last_error());
            return;
        }
        t[i] = (float)elapsed_ms(b);
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_float);
    r->reps[op] = reps;
    r->ms_min[op] = t[0];
    r->ms[op] = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    r->tflops[op] = r->flop[op] / (r->ms[op] * 1e-3) / 1e12;
}

static void first_line(const char *cmd, char *buf, size_t n) {
    snprintf(buf, n, "unknown");
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (fgets(buf, (int)n, p)) buf[strcspn(buf, "\n")] = '\0';
    else snprintf(buf, n, "unknown");
    pclose(p);
}

/* src without quotes, backslashes and control characters, so that it is a valid JSON string. */
static void json_clean(char *dst, size_t n, const char *src) {
    size_t k = 0;
    for (const char *q = src; *q && k + 1 < n; q++)
        if (*q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) dst[k++] = *q;
    dst[k] = '\0';
}

static void json_num(FILE *f, const char *key, double v) {
    if (isnan(v) || isinf(v)) fprintf(f, ", \"%s\": null", key);
    else fprintf(f, ", \"%s\": %.6g", key, v);
}

/* {"meta": {...}, "results": [ -- the caller writes the records and closes with "\n]}\n". */
static FILE *json_start(const att_opts *o, const char *method, const char *extra) {
    FILE *f = fopen(o->json, "w");
    if (!f) {
        perror(o->json);
        fprintf(stderr, "hint: check that the directory of --json exists and is writable\n");
        return NULL;
    }
    struct cudaDeviceProp prop;
    BENCH_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0, rt = 0, drv = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    char commit[64], date[32], smi[160], command[sizeof o->command], commit_clean[64];
    if (o->commit) snprintf(commit, sizeof commit, "%s", o->commit);
    else first_line("git rev-parse --short HEAD 2>/dev/null", commit, sizeof commit);
    first_line("nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,driver_version --format=csv,noheader 2>/dev/null", smi,
               sizeof smi);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_clean(command, sizeof command, o->command);
    json_clean(commit_clean, sizeof commit_clean, commit);
    fprintf(f,
            "{\"meta\": {\"gpu\": \"%s\", \"sms\": %d, \"sm_clock_max_mhz\": %d, \"nvidia_smi_clocks_sm_max_driver\": "
            "\"%s\", \"cuda_runtime\": \"%d.%d\", \"cuda_driver_api\": \"%d.%d\", \"commit\": \"%s\", \"date\": "
            "\"%s\", \"command\": \"%s\", \"reps\": %d, \"warmup\": %d, \"l2_flush_bytes\": %zu, \"tokens\": %lld, "
            "\"hidden\": %lld, \"method\": \"%s\"%s},\n \"results\": [",
            prop.name, prop.multiProcessorCount, clock_khz / 1000, smi, rt / 1000, rt % 1000 / 10, drv / 1000,
            drv % 1000 / 10, commit_clean, date, command, (int)o->reps, WARMUP, FLUSH_BYTES, (long long)o->tokens,
            (long long)o->hidden, method, extra);
    return f;
}

static void write_json(const att_opts *o, const record *rec, int n) {
    FILE *f = json_start(o, "median of reps after 3 warm-ups, CUDA events around the public call(s), untimed 256 MiB "
                            "memset before each; fwd flops 4 B H S^2 D (x0.5 causal), fwd_bwd 3.5x that", "");
    if (!f) return;
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int op = 0; op < N_OPS; op++) {
            const record *r = &rec[i];
            if (r->flop[op] == 0) continue; /* not selected */
            fprintf(f,
                    "%s\n  {\"family\": \"attention\", \"op\": \"%s\", \"dtype\": \"bf16\", \"layout\": \"bshd\", "
                    "\"shape\": {\"B\": %lld, \"S\": %lld, \"H\": %lld, \"D\": %lld, \"causal\": %s}, \"flop\": %.6g",
                    k++ ? "," : "", OP_NAME[op], (long long)r->B, (long long)r->S, (long long)r->H, (long long)r->D,
                    r->causal ? "true" : "false", r->flop[op]);
            const bool ok = !r->skipped[op][0] && !r->error[op][0];
            json_num(f, "ours", ok ? r->tflops[op] : NAN);
            fprintf(f, ", \"reference\": null, \"ref_name\": \"none (bench/torch_attention.py --combine adds PyTorch "
                       "SDPA)\", \"unit\": \"TFLOP/s\", \"ratio\": null");
            json_num(f, "ours_ms", ok ? r->ms[op] : NAN);
            json_num(f, "ours_ms_min", ok ? r->ms_min[op] : NAN);
            fprintf(f, ", \"reps\": %d", r->reps[op]);
            char clean[240];
            if (r->skipped[op][0]) {
                json_clean(clean, sizeof clean, r->skipped[op]);
                fprintf(f, ", \"skipped\": \"%s\"", clean);
            }
            if (r->error[op][0]) {
                json_clean(clean, sizeof clean, r->error[op]);
                fprintf(f, ", \"error\": \"%s\"", clean);
            }
            fprintf(f, "}");
        }
    fprintf(f, "\n]}\n");
    fclose(f);
    printf("wrote %s\n", o->json);
}

static void print_cell(const record *r, int op) {
    if (r->flop[op] == 0) printf(" %9s %9s", "-", "-");
    else if (r->skipped[op][0]) printf(" %9s %9s", "skipped", "");
    else if (r->error[op][0]) printf(" %9s %9s", "FAILED", "");
    else printf(" %9.3f %9.1f", r->ms[op], r->tflops[op]);
}

static void print_row(const record *r) {
    printf("%4lld %6lld %3lld %3lld %-6s", (long long)r->D, (long long)r->S, (long long)r->B, (long long)r->H,
           r->causal ? "yes" : "no");
    print_cell(r, OP_FWD);
    print_cell(r, OP_FWD_BWD);
    printf("\n");
    for (int op = 0; op < N_OPS; op++) {
        if (r->skipped[op][0]) printf("      %s skipped: the library says: %s\n", OP_NAME[op], r->skipped[op]);
        if (r->error[op][0]) printf("      %s FAILED: %s\n", OP_NAME[op], r->error[op]);
    }
    fflush(stdout);
}

static int run_throughput(const att_opts *o) {
    if (!gpu_ready("")) return 77;
    static record rec[MAX_LIST * MAX_LIST * 2];
    int n = 0;
    int64_t max_elems = 0, max_rows = 0;
    for (int i = 0; i < o->nd; i++)
        for (int j = 0; j < o->ns; j++)
            for (int c = 0; c < 2; c++) {
                if (!o->causal_mode[c]) continue;
                record *r = &rec[n++];
                memset(r, 0, sizeof *r);
                r->D = o->d[i], r->S = o->s[j], r->causal = c == 1;
                r->B = o->tokens / r->S, r->H = o->hidden / r->D;
                r->flop[OP_FWD] = fwd_flop(r);
                r->flop[OP_FWD_BWD] = 3.5 * fwd_flop(r);
                const int64_t elems = r->B * r->S * r->H * r->D, rows = r->B * r->H * r->S;
                max_elems = elems > max_elems ? elems : max_elems;
                max_rows = rows > max_rows ? rows : max_rows;
            }
    bench b;
    if (!setup(&b, max_elems, max_rows)) return 1;
    struct cudaDeviceProp prop;
    BENCH_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("camel bench attention on %s (%d SMs): bf16 [B,S,H,D], B*S = %lld, hidden %lld, median of %lld timed "
           "calls (at most %.0f s a case), L2 flushed before each\n",
           prop.name, prop.multiProcessorCount, (long long)o->tokens, (long long)o->hidden, (long long)o->reps,
           o->max_case_seconds);
    printf("%4s %6s %3s %3s %-6s %9s %9s %9s %9s\n", "D", "S", "B", "H", "causal", "fwd ms", "fwd TF/s", "f+b ms",
           "f+b TF/s");
    cli_progress prog;
    cli_progress_start(&prog, "bench attention", n, "cases");
    int failures = 0;
    for (int i = 0; i < n; i++) {
        record *r = &rec[i];
        cml_attention_desc d = cml_attention_desc_bshd(r->B, r->S, r->S, r->H, r->H, r->D, r->causal, CML_BF16);
        for (int op = 0; op < N_OPS; op++) {
            time_op(&b, o, &d, op, r);
            failures += r->error[op][0] != 0;
        }
        cli_progress_finish(&prog);
        print_row(r);
        cli_progress_update(&prog, i + 1, NULL, 0);
    }
    cli_progress_finish(&prog);
    if (o->json) write_json(o, rec, n);
    if (failures) fprintf(stderr, "camel bench attention: %d measurement(s) failed (see the FAILED lines)\n", failures);
    return failures ? 1 : 0;
}

/* ---- constant-time check ------------------------------------------------------------------------- */

enum { TC_FWD, TC_BWD, TC_CONTROL, N_TC };
static const char *const TC_NAME[N_TC] = {"fwd", "bwd", "control"};

typedef struct tc_result {
    const char *op;
    bool causal;
    welch all, cropped;
    double crop_limit;
} tc_result;

typedef struct tc_pools {
    void *pool[4];       /* Q, K, V, dO: random values, elems + span each */
    int64_t elems, span; /* elements of one tensor; window offsets are in [0, span) */
} tc_pools;

/* The inputs of one run: a window of each pool at the given offsets copied into Q, K, V, dO. */
static void tc_load(bench *b, const tc_pools *p, const int64_t off[4], int count) {
    void *dst[4] = {b->Q, b->K, b->V, b->dO};
    for (int i = 0; i < count; i++)
        BENCH_CUDA_OK(cudaMemcpyAsync(dst[i], (const uint16_t *)p->pool[i] + off[i], 2 * (size_t)p->elems,
                                cudaMemcpyDeviceToDevice, b->st));
}

/* Whether element off of pool 0 (Q's) is negative: the positive control's branch. */
static bool tc_q0_negative(const tc_pools *p, int64_t off) {
    uint16_t h = 0;
    BENCH_CUDA_OK(cudaMemcpy(&h, (const uint16_t *)p->pool[0] + off, sizeof h, cudaMemcpyDeviceToHost));
    return (h & 0x8000u) != 0;
}

static tc_result tc_measure(bench *b, const tc_pools *p, const cml_attention_desc *d, int which, int64_t runs,
                            uint64_t seed, double *times) {
    tc_result res;
    memset(&res, 0, sizeof res);
    res.op = TC_NAME[which];
    res.causal = d->causal;
    unsigned char *cls = malloc((size_t)runs);
    int64_t(*offs)[4] = malloc(sizeof *offs * (size_t)runs);
    bool *neg = malloc(sizeof(bool) * (size_t)runs);
    if (!cls || !offs || !neg) {
        fprintf(stderr, "camel bench attention: out of host memory\n");
        exit(1);
    }
    cml_rng rng;
    cml_rng_init(&rng, seed);
    for (int64_t i = 0; i < runs; i++) cls[i] = i < runs / 2 ? 0 : 1;
    for (int64_t i = runs - 1; i > 0; i--) { /* Fisher-Yates: a random interleaving */
        int64_t j = (int64_t)cml_rng_below(&rng, (uint32_t)(i + 1));
        unsigned char t = cls[i];
        cls[i] = cls[j], cls[j] = t;
    }
    const int64_t fixed[4] = {0, 0, 0, 0};
    const bool fixed_neg = tc_q0_negative(p, 0);
    for (int64_t i = 0; i < runs; i++) { /* each random run: fresh windows, multiples of 8 elements (16 bytes) */
        for (int k = 0; k < 4; k++)
            offs[i][k] = cls[i] ? 8 * (int64_t)cml_rng_below(&rng, (uint32_t)(p->span / 8)) : fixed[k];
        neg[i] = cls[i] ? tc_q0_negative(p, offs[i][0]) : fixed_neg;
    }
    const int inputs = which == TC_BWD ? 4 : 3;
    const int64_t warm = runs / 20 > 20 ? runs / 20 : 20;
    for (int64_t i = -warm; i < runs; i++) { /* i < 0: warm-up, untimed, alternating classes */
        const int64_t k = i < 0 ? (-i) % runs : i;
        tc_load(b, p, offs[k], inputs);
        if (which == TC_BWD) BENCH_CML_OK(call_fwd(b, d)); /* O and lse of these inputs (untimed) */
        flush_l2(b, (int)(i & 0xFF));
        BENCH_CUDA_OK(cudaEventRecord(b->ev0, b->st));
        if (which == TC_BWD) BENCH_CML_OK(call_bwd(b, d));
        else BENCH_CML_OK(call_fwd(b, d));
        if (which == TC_CONTROL && neg[k]) /* the data-dependent branch of the positive control */
            BENCH_CUDA_OK(cudaMemsetAsync(b->flush, 0, CONTROL_BYTES, b->st));
        BENCH_CUDA_OK(cudaEventRecord(b->ev1, b->st));
        const double ms = elapsed_ms(b);
        if (i >= 0) times[i] = ms;
    }
    res.all = welch_t(times, cls, runs, INFINITY);
    res.crop_limit = quantile(times, runs, 0.95);
    res.cropped = welch_t(times, cls, runs, res.crop_limit);
    free(cls);
    free(offs);
    free(neg);
    return res;
}

static void tc_print(const tc_result *r) {
    printf("%-8s %-6s %6lld %6lld %10.5f %10.5f %9.5f %9.5f %8.2f %10.2f  %s\n", r->op, r->causal ? "yes" : "no",
           (long long)r->all.n[0], (long long)r->all.n[1], r->all.mean[0], r->all.mean[1], r->all.sd[0],
           r->all.sd[1], r->all.t, r->cropped.t,
           fmax(fabs(r->all.t), fabs(r->cropped.t)) < 4.5 ? "no detectable data dependence" : "DIFFERENCE DETECTED");
    fflush(stdout);
}

static void tc_write_json(const att_opts *o, const tc_result *res, int n) {
    char extra[160];
    snprintf(extra, sizeof extra, ", \"tc_runs\": %lld, \"control_bytes\": %zu, \"crop_quantile\": 0.95",
             (long long)o->tc_runs, CONTROL_BYTES);
    FILE *f = json_start(o, "fixed vs random inputs in random interleaved order; before each run its inputs are "
                            "copied into the same buffers (bwd: forward run untimed), untimed 256 MiB memset, CUDA "
                            "events around the call; Welch t of random minus fixed, on all runs and on runs at or "
                            "under the pooled 95th percentile", extra);
    if (!f) return;
    for (int i = 0; i < n; i++) {
        const tc_result *r = &res[i];
        fprintf(f,
                "%s\n  {\"family\": \"attention\", \"op\": \"constant_time_%s\", \"dtype\": \"bf16\", \"layout\": "
                "\"bshd\", \"shape\": {\"B\": %lld, \"S\": %lld, \"H\": %lld, \"D\": %lld, \"causal\": %s}",
                i ? "," : "", r->op, (long long)o->tc_shape[0], (long long)o->tc_shape[1], (long long)o->tc_shape[2],
                (long long)o->tc_shape[3], r->causal ? "true" : "false");
        json_num(f, "ours", r->all.t);
        fprintf(f, ", \"reference\": 4.5, \"ref_name\": \"threshold: |t| < 4.5 means no detectable data dependence%s\", "
                   "\"unit\": \"Welch t\", \"ratio\": null",
                strcmp(r->op, "control") == 0 ? " (positive control: must exceed it)" : "");
        json_num(f, "t", r->all.t);
        json_num(f, "t_cropped_p95", r->cropped.t);
        json_num(f, "crop_limit_ms", r->crop_limit);
        fprintf(f, ", \"n_fixed\": %lld, \"n_random\": %lld", (long long)r->all.n[0], (long long)r->all.n[1]);
        json_num(f, "mean_fixed_ms", r->all.mean[0]);
        json_num(f, "mean_random_ms", r->all.mean[1]);
        json_num(f, "sd_fixed_ms", r->all.sd[0]);
        json_num(f, "sd_random_ms", r->all.sd[1]);
        fprintf(f, ", \"n_fixed_cropped\": %lld, \"n_random_cropped\": %lld", (long long)r->cropped.n[0],
                (long long)r->cropped.n[1]);
        json_num(f, "mean_fixed_cropped_ms", r->cropped.mean[0]);
        json_num(f, "mean_random_cropped_ms", r->cropped.mean[1]);
        json_num(f, "sd_fixed_cropped_ms", r->cropped.sd[0]);
        json_num(f, "sd_random_cropped_ms", r->cropped.sd[1]);
        if (strcmp(r->op, "control") == 0) fprintf(f, ", \"control_extra\": \"memset of %zu bytes when Q[0] < 0\"",
                                                   CONTROL_BYTES);
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
    fclose(f);
    printf("wrote %s\n", o->json);
}

static int run_timing_check(const att_opts *o) {
    if (!gpu_ready(" --timing-check")) return 77;
    const int64_t B = o->tc_shape[0], S = o->tc_shape[1], H = o->tc_shape[2], D = o->tc_shape[3];
    const int64_t elems = B * S * H * D;
    bench b;
    if (!setup(&b, elems, B * H * S)) return 1;
    tc_pools p;
    memset(&p, 0, sizeof p);
    p.elems = elems;
    p.span = elems; /* windows of elems start anywhere in the first half of a pool of 2 * elems */
    for (int i = 0; i < 4; i++) {
        p.pool[i] = bench_dmalloc(2 * (size_t)(p.elems + p.span));
        fill_random_bf16(p.pool[i], p.elems + p.span, 1000 + (uint64_t)i);
    }
    /* the shape must be accepted before thousands of runs are made */
    for (int c = 0; c < 2; c++) {
        if (!o->causal_mode[c]) continue;
        cml_attention_desc d = cml_attention_desc_bshd(B, S, S, H, H, D, c == 1, CML_BF16);
        if (call_fwd_bwd(&b, &d) != CML_OK) {
            printf("camel bench attention --timing-check: the library rejects B=%lld S=%lld H=%lld D=%lld causal=%d: "
                   "%s\n", (long long)B, (long long)S, (long long)H, (long long)D, c, cml_last_error());
            return 1;
        }
    }
    BENCH_CUDA_OK(cudaStreamSynchronize(b.st));
    double *times = malloc(sizeof(double) * (size_t)o->tc_runs);
    if (!times) {
        fprintf(stderr, "camel bench attention: out of host memory\n");
        return 1;
    }
    printf("camel bench attention --timing-check: B=%lld S=%lld H=%lld D=%lld bf16, %lld runs per test (half fixed, "
           "half fresh random inputs, random order), L2 flushed before each; t = Welch's t of random minus fixed; "
           "t p95: over the runs at or under the pooled 95th percentile; control: fwd + a %zu MiB memset when Q[0] < 0\n",
           (long long)B, (long long)S, (long long)H, (long long)D, (long long)o->tc_runs, CONTROL_BYTES >> 20);
    printf("%-8s %-6s %6s %6s %10s %10s %9s %9s %8s %10s  %s\n", "op", "causal", "n fix", "n rand", "mean fix",
           "mean rand", "sd fix", "sd rand", "t", "t p95", "verdict (|t| < 4.5 on both)");
    tc_result res[N_TC * 2];
    int n = 0, tests = 0;
    for (int c = 0; c < 2; c++) tests += o->causal_mode[c] ? 2 : 0;
    tests += 1;
    cli_progress prog;
    cli_progress_start(&prog, "timing check", tests, "tests");
    for (int which = 0; which < N_TC; which++)
        for (int c = 0; c < 2; c++) {
            if (which == TC_CONTROL ? c != 0 : !o->causal_mode[c]) continue; /* the control: non-causal only */
            cml_attention_desc d = cml_attention_desc_bshd(B, S, S, H, H, D, c == 1, CML_BF16);
            res[n] = tc_measure(&b, &p, &d, which, o->tc_runs, 7919 * (uint64_t)(n + 1), times);
            cli_progress_finish(&prog);
            tc_print(&res[n]);
            n++;
            cli_progress_update(&prog, n, NULL, 0);
        }
    cli_progress_finish(&prog);
    printf("(times in ms; the control must show |t| >= 4.5 for the check to mean anything)\n");
    free(times);
    if (o->json) tc_write_json(o, res, n);
    return 0;
}
#else
static int run_throughput(const att_opts *o) {
    (void)o;
    printf("camel bench attention: skipped: this camel was built without CUDA (configure with -DCML_CUDA=ON on a "
           "machine with nvcc)\n");
    return 77;
}
static int run_timing_check(const att_opts *o) { return run_throughput(o); }
#endif

int cmd_bench_attention(int argc, char **argv) {
    att_opts o;
    memset(&o, 0, sizeof o);
    o.reps = 20;
    o.tokens = 16384;
    o.hidden = 2048;
    o.tc_runs = 4000;
    o.max_case_seconds = 20;
    const char *d_text = "64,128,256", *s_text = "512,1024,2048,4096,8192,16384", *causal = "both";
    const char *tc_shape = "4,2048,16,128";
    cli_flag flags[] = {
        {"d", CLI_STRING, &d_text, "head dims, comma-separated"},
        {"s", CLI_STRING, &s_text, "sequence lengths, comma-separated (each must divide --tokens)"},
        {"causal", CLI_STRING, &causal, "both, yes (causal only) or no (non-causal only)"},
        {"reps", CLI_INT, &o.reps, "timed calls per case, 1..1000 (median reported; at least 20 for results)"},
        {"quick", CLI_BOOL, &o.quick, "S in {512, 2048} only (unless --s is given); --timing-check: 1000 runs"},
        {"tokens", CLI_INT, &o.tokens, "B * S"},
        {"hidden", CLI_INT, &o.hidden, "H * D"},
        {"max-case-seconds", CLI_FLOAT, &o.max_case_seconds,
         "fewer timed calls (not under 5) when a case would take longer; the JSON records the count"},
        {"json", CLI_STRING, &o.json, "write the results (DESIGN.md section 5 format) to this file"},
        {"commit", CLI_STRING, &o.commit, "commit recorded in the JSON meta (default: git rev-parse --short HEAD)"},
        {"timing-check", CLI_BOOL, &o.timing_check, "run the constant-time check (fixed vs random inputs) instead"},
        {"tc-shape", CLI_STRING, &tc_shape, "B,S,H,D of the timing check"},
        {"tc-runs", CLI_INT, &o.tc_runs, "timed runs per timing-check test, half of each class (>= 100)"},
    };
    bool s_given = false;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--s") == 0 || strncmp(argv[i], "--s=", 4) == 0) s_given = true;
    bool runs_given = false;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--tc-runs") == 0 || strncmp(argv[i], "--tc-runs=", 10) == 0) runs_given = true;
    int rc = cli_parse(argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), USAGE, ABOUT);
    if (rc) return rc == 1 ? 0 : rc;
    if (o.quick && !s_given) s_text = "512,2048";
    if (o.quick && !runs_given) o.tc_runs = 1000;
    if (o.reps < 1 || o.reps > MAX_REPS) {
        fprintf(stderr, "camel bench attention: --reps=%lld must be in [1, %d]\n", (long long)o.reps, MAX_REPS);
        return 2;
    }
    if (o.tc_runs < 100 || o.tc_runs > 10000000) {
        fprintf(stderr, "camel bench attention: --tc-runs=%lld must be in [100, 10000000]\n", (long long)o.tc_runs);
        return 2;
    }
    if (!(o.max_case_seconds > 0)) {
        fprintf(stderr, "camel bench attention: --max-case-seconds must be > 0\n");
        return 2;
    }
    o.nd = parse_ints(d_text, o.d, MAX_LIST);
    o.ns = parse_ints(s_text, o.s, MAX_LIST);
    if (o.nd <= 0 || o.ns <= 0) {
        fprintf(stderr, "camel bench attention: --%s expects up to %d positive integers separated by commas, got "
                        "\"%s\"\n", o.nd <= 0 ? "d" : "s", MAX_LIST, o.nd <= 0 ? d_text : s_text);
        return 2;
    }
    if (!parse_causal(causal, o.causal_mode)) {
        fprintf(stderr, "camel bench attention: --causal expects both, yes or no, got \"%s\"\n", causal);
        return 2;
    }
    if (o.tokens <= 0 || o.hidden <= 0) {
        fprintf(stderr, "camel bench attention: --tokens and --hidden must be positive\n");
        return 2;
    }
    for (int i = 0; i < o.ns; i++)
        if (o.tokens % o.s[i]) {
            fprintf(stderr, "camel bench attention: S=%lld does not divide --tokens=%lld\n", (long long)o.s[i],
                    (long long)o.tokens);
            return 2;
        }
    for (int i = 0; i < o.nd; i++)
        if (o.hidden % o.d[i]) {
            fprintf(stderr, "camel bench attention: D=%lld does not divide --hidden=%lld\n", (long long)o.d[i],
                    (long long)o.hidden);
            return 2;
        }
    if (parse_ints(tc_shape, o.tc_shape, 4) != 4) {
        fprintf(stderr, "camel bench attention: --tc-shape expects four positive integers B,S,H,D, got \"%s\"\n",
                tc_shape);
        return 2;
    }
    if (o.tc_shape[0] * o.tc_shape[1] * o.tc_shape[2] * o.tc_shape[3] > ((int64_t)1 << 30)) {
        fprintf(stderr, "camel bench attention: --tc-shape %s is too large (at most 2^30 elements a tensor)\n",
                tc_shape);
        return 2;
    }
    size_t used = 0; /* the command line as run, for the JSON's meta */
    for (int i = -3; i < argc && used + 2 < sizeof o.command; i++) {
        const char *w = i == -3 ? "camel" : i == -2 ? "bench" : i == -1 ? "attention" : argv[i];
        int n = snprintf(o.command + used, sizeof o.command - used, "%s%s", used ? " " : "", w);
        if (n < 0) break;
        used += (size_t)n < sizeof o.command - used ? (size_t)n : sizeof o.command - used - 1;
    }
    return o.timing_check ? run_timing_check(&o) : run_throughput(&o);
}
