/* bench_adamw: one AdamW step over the GPT-2 small (124M) parameter set, ours
 * vs the device-to-device copy bandwidth measured in the same process (and vs
 * PyTorch's fused AdamW through bench/torch_adamw.py, run in the same job).
 *
 * The 148 tensors of GPT-2 small (wte 50257x768, wpe 1024x768, per layer: ln_1
 * and ln_2 weight/bias 768, attn.c_attn 768x2304 + 2304, attn.c_proj 768x768 +
 * 768, mlp.c_fc 768x3072 + 3072, mlp.c_proj 3072x768 + 768; 12 layers; ln_f),
 * 124,439,808 parameters, each its own allocation, random params and grads.
 * Timed (median of --reps after 3 warm-ups, CUDA events on the context's
 * stream):
 *   step       cml_optim_step of a cml_adamw_create optimizer (the framework
 *              path: one fused launch, cml_adam_update_multi);
 *   clip+step  cml_optim_clip_grad_norm(1.0) + cml_optim_step (three launches,
 *              no host synchronization);
 *   kernel     cml_adam_update_multi alone on the same buffers;
 *   per-tensor cml_adam_update called 148 times (the unfused path, for scale).
 * Before each timed call an untimed 2 GiB memset runs on the stream: it evicts
 * L2 and it keeps the device busy while the host issues the timed work, so the
 * time is the device's (host overheads hidden; torch_adamw.py does the same).
 * GB/s counts the bytes that must move: param read+write, grad read, m and v
 * read+write = 28 bytes per parameter (f32); clipping adds one read of the
 * grads: 32 bytes per parameter.
 *
 *   bench_adamw [--reps N] [--json PATH] [--commit SHA]
 * prints a table, and with --json writes the numbers for
 * bench/torch_adamw.py --combine. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "camel/camel.h"
#include "framework/tensor_impl.h" /* to attach ready-made grads to the parameters */
#include "runtime/ctx_impl.h"

#define BENCH_WHO "bench_adamw"
#define BENCH_HINT "free the GPU of other work"
#include "bench_cuda.h"


#define NT 148 /* tensors of GPT-2 small */
#define DELAY_BYTES ((size_t)2 << 30)
#define MAX_REPS 1000

typedef struct bench {
    cml_ctx *ctx;
    cudaStream_t st;
    cudaEvent_t ev0, ev1;
    void *delay;
    int reps;
    cml_tensor *t[NT];
    cml_param params[NT];
    cml_optim *opt;
    cml_param_list *list;
    int64_t nparams;
} bench;

/* The GPT-2 small parameter shapes, in the order of its state dict. */
static int gpt2_shapes(int64_t shapes[NT][2], char names[NT][CML_NAME_MAX]) {
    const int64_t C = 768;
    int k = 0;
#define ADD(name, r, c) (snprintf(names[k], CML_NAME_MAX, "%s", name), shapes[k][0] = (r), shapes[k][1] = (c), k++)
    ADD("wte", 50257, C);
    ADD("wpe", 1024, C);
    for (int l = 0; l < 12; l++) {
        ADD("ln_1.weight", 1, C), ADD("ln_1.bias", 1, C);
        ADD("attn.c_attn.weight", C, 3 * C), ADD("attn.c_attn.bias", 1, 3 * C);
        ADD("attn.c_proj.weight", C, C), ADD("attn.c_proj.bias", 1, C);
        ADD("ln_2.weight", 1, C), ADD("ln_2.bias", 1, C);
        ADD("mlp.c_fc.weight", C, 4 * C), ADD("mlp.c_fc.bias", 1, 4 * C);
        ADD("mlp.c_proj.weight", 4 * C, C), ADD("mlp.c_proj.bias", 1, C);
    }
    ADD("ln_f.weight", 1, C);
    ADD("ln_f.bias", 1, C);
#undef ADD
    return k;
}

/* Uniform random values in [lo, hi) (xorshift64*), copied in 16M pieces. */
static void fill_random(float *dst, int64_t n, uint64_t seed, float lo, float hi) {
    const int64_t block = (int64_t)1 << 24;
    const int64_t m = n < block ? n : block;
    float *h = malloc(sizeof(float) * (size_t)m);
    if (!h) exit(1);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i += m) {
        for (int64_t j = 0; j < m; j++) {
            s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
            h[j] = lo + (hi - lo) * (float)((s * 0x2545F4914F6CDD1Dull) >> 40) * (1.0f / 16777216.0f);
        }
        BENCH_CUDA_OK(cudaMemcpy(dst + i, h, sizeof(float) * (size_t)(n - i < m ? n - i : m), cudaMemcpyHostToDevice));
    }
    free(h);
}

static void setup(bench *b) {
    const cml_device dev = {CML_CUDA, 0};
    b->ctx = cml_ctx_default(dev);
    if (!b->ctx) {
        fprintf(stderr, "bench_adamw: no CUDA context: %s\n", cml_last_error());
        exit(1);
    }
    b->st = (cudaStream_t)cml_ctx_stream(b->ctx);
    BENCH_CUDA_OK(cudaEventCreate(&b->ev0));
    BENCH_CUDA_OK(cudaEventCreate(&b->ev1));
    BENCH_CUDA_OK(cudaMalloc(&b->delay, DELAY_BYTES));
    int64_t shapes[NT][2];
    char names[NT][CML_NAME_MAX];
    const int k = gpt2_shapes(shapes, names);
    if (k != NT) exit(1);
    for (int i = 0; i < NT; i++) {
        const int ndim = shapes[i][0] == 1 ? 1 : 2;
        const int64_t *shape = ndim == 1 ? &shapes[i][1] : shapes[i];
        b->t[i] = cml_tensor_zeros(ndim, shape, CML_F32, dev);
        cml_tensor *g = cml_tensor_zeros(ndim, shape, CML_F32, dev);
        if (!b->t[i] || !g) {
            fprintf(stderr, "bench_adamw: %s\n", cml_last_error());
            exit(1);
        }
        const int64_t n = cml_tensor_numel(b->t[i]);
        fill_random(cml_tensor_data(b->t[i]), n, 2 * (uint64_t)i + 1, -0.05f, 0.05f);
        fill_random(cml_tensor_data(g), n, 2 * (uint64_t)i + 2, -0.01f, 0.01f);
        cml_tensor_set_requires_grad(b->t[i], true);
        b->t[i]->grad = g; /* what a backward would have left there */
        snprintf(b->params[i].name, CML_NAME_MAX, "%d.%.60s", i, names[i]);
        b->params[i].tensor = b->t[i];
        b->nparams += n;
    }
    b->opt = cml_adamw_create(b->params, NT, (cml_adam_opts){6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f});
    if (!b->opt) {
        fprintf(stderr, "bench_adamw: %s\n", cml_last_error());
        exit(1);
    }
    /* the kernel-level list: the same buffers, with the optimizer's own exp_avg / exp_avg_sq */
    static cml_param state[2 + 3 * NT];
    const int ns = cml_optim_state(b->opt, state, 2 + 3 * NT);
    cml_param_slice sl[NT];
    for (int i = 0; i < NT; i++) {
        cml_tensor *p = b->t[i];
        sl[i] = (cml_param_slice){cml_tensor_data(p), cml_tensor_data(p->grad), NULL, NULL, cml_tensor_numel(p)};
        char want_m[CML_NAME_MAX + 16], want_v[CML_NAME_MAX + 16];
        snprintf(want_m, sizeof want_m, "exp_avg.%s", b->params[i].name);
        snprintf(want_v, sizeof want_v, "exp_avg_sq.%s", b->params[i].name);
        for (int s = 0; s < ns; s++) {
            if (!strcmp(state[s].name, want_m)) sl[i].m = cml_tensor_data(state[s].tensor);
            if (!strcmp(state[s].name, want_v)) sl[i].v = cml_tensor_data(state[s].tensor);
        }
    }
    BENCH_CML_OK(cml_param_list_create(b->ctx, &b->list));
    BENCH_CML_OK(cml_param_list_set(b->list, sl, NT, NULL));
    BENCH_CUDA_OK(cudaDeviceSynchronize());
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef void (*call_fn)(bench *b);

/* Median milliseconds of `reps` calls of fn, each after the untimed 2 GiB memset. */
static float time_median(bench *b, call_fn fn) {
    static float t[MAX_REPS];
    for (int i = 0; i < 3; i++) fn(b);
    for (int i = 0; i < b->reps; i++) {
        BENCH_CUDA_OK(cudaMemsetAsync(b->delay, i & 0xFF, DELAY_BYTES, b->st));
        BENCH_CUDA_OK(cudaEventRecord(b->ev0, b->st));
        fn(b);
        BENCH_CUDA_OK(cudaEventRecord(b->ev1, b->st));
        BENCH_CUDA_OK(cudaEventSynchronize(b->ev1));
        BENCH_CUDA_OK(cudaEventElapsedTime(&t[i], b->ev0, b->ev1));
    }
    qsort(t, (size_t)b->reps, sizeof t[0], cmp_float);
    return b->reps % 2 ? t[b->reps / 2] : 0.5f * (t[b->reps / 2 - 1] + t[b->reps / 2]);
}

static void call_step(bench *b) { BENCH_CML_OK(cml_optim_step(b->opt)); }

static void call_clip_step(bench *b) {
    BENCH_CML_OK(cml_optim_clip_grad_norm(b->opt, 1.0));
    BENCH_CML_OK(cml_optim_step(b->opt));
}

static void call_kernel(bench *b) {
    BENCH_CML_OK(cml_adam_update_multi(b->ctx, b->list, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, true, 10, NULL));
}

static void call_kernel_clip(bench *b) {
    BENCH_CML_OK(cml_param_list_grad_norm(b->ctx, b->list, 1.0));
    BENCH_CML_OK(cml_adam_update_multi(b->ctx, b->list, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, true, 10,
                                 cml_param_list_clip_coef(b->list)));
}

static void call_norm(bench *b) { BENCH_CML_OK(cml_param_list_grad_norm(b->ctx, b->list, 1.0)); }

static void call_per_tensor(bench *b) {
    static cml_param state[2 + 3 * NT];
    static int ns = 0;
    if (!ns) ns = cml_optim_state(b->opt, state, 2 + 3 * NT);
    for (int i = 0; i < NT; i++) { /* state order: step.p, exp_avg.p, exp_avg_sq.p after lr and steps */
        cml_tensor *p = b->t[i];
        BENCH_CML_OK(cml_adam_update(b->ctx, cml_tensor_data(p), cml_tensor_data(p->grad),
                               cml_tensor_data(state[2 + 3 * i + 1].tensor), cml_tensor_data(state[2 + 3 * i + 2].tensor),
                               cml_tensor_numel(p), 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, true, 10));
    }
}

static void call_copy(bench *b) {
    BENCH_CUDA_OK(cudaMemcpyAsync((char *)b->delay + (DELAY_BYTES / 2), b->delay, DELAY_BYTES / 2, cudaMemcpyDeviceToDevice,
                            b->st));
}

typedef struct row {
    const char *op, *what;
    double bytes_per_param, ms, gbps;
} row;

int main(int argc, char **argv) {
    const char *json = NULL, *commit = "unknown";
    int reps = 50;
    char command[512] = "";
    for (int i = 0; i < argc; i++)
        if (strlen(command) + strlen(argv[i]) + 2 < sizeof command) {
            if (i) strcat(command, " ");
            strcat(command, argv[i]);
        }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
        else {
            fprintf(stderr, "usage: bench_adamw [--reps N (20..1000)] [--json PATH] [--commit SHA]\n");
            return 2;
        }
    }
    if (reps < 20 || reps > MAX_REPS) {
        fprintf(stderr, "bench_adamw: --reps must be in [20, %d]\n", MAX_REPS);
        return 2;
    }
    const char *why = NULL;
    if (!cml_cuda_available(&why)) {
        printf("bench_adamw: skipped: %s\n", why);
        return 77;
    }
    bench b;
    memset(&b, 0, sizeof b);
    b.reps = reps;
    setup(&b);
    const double copy_gbps = 2.0 * (double)(DELAY_BYTES / 2) / (time_median(&b, call_copy) * 1e-3) / 1e9;
    printf("GPT-2 small: %d tensors, %lld parameters; copy D2D 1 GiB: %.1f GB/s (read + write)\n\n", NT,
           (long long)b.nparams, copy_gbps);
    row rows[] = {
        {"adamw", "cml_optim_step (fused, 1 launch)", 28, 0, 0},
        {"adamw_clip", "cml_optim_clip_grad_norm + cml_optim_step (3 launches)", 32, 0, 0},
        {"adamw_kernel", "cml_adam_update_multi", 28, 0, 0},
        {"adamw_clip_kernel", "cml_param_list_grad_norm + cml_adam_update_multi", 32, 0, 0},
        {"grad_norm", "cml_param_list_grad_norm (2 launches)", 4, 0, 0},
        {"adamw_per_tensor", "cml_adam_update x 148 (unfused)", 28, 0, 0},
    };
    const call_fn fns[] = {call_step, call_clip_step, call_kernel, call_kernel_clip, call_norm, call_per_tensor};
    const int nrows = (int)(sizeof rows / sizeof rows[0]);
    printf("%-18s %-56s %9s %9s %7s\n", "op", "what", "ms", "GB/s", "%copy");
    for (int r = 0; r < nrows; r++) {
        rows[r].ms = time_median(&b, fns[r]);
        rows[r].gbps = rows[r].bytes_per_param * (double)b.nparams / (rows[r].ms * 1e-3) / 1e9;
        printf("%-18s %-56s %9.4f %9.1f %6.1f%%\n", rows[r].op, rows[r].what, rows[r].ms, rows[r].gbps,
               100.0 * rows[r].gbps / copy_gbps);
        fflush(stdout);
    }
    double norm = 0;
    BENCH_CML_OK(cml_optim_grad_norm(b.opt, &norm));
    printf("\n(last grad norm %.6g; %lld optimizer steps taken)\n", norm, (long long)cml_optim_steps(b.opt));
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            fprintf(stderr, "bench_adamw: cannot write %s\n", json);
            return 1;
        }
        struct cudaDeviceProp p;
        BENCH_CUDA_OK(cudaGetDeviceProperties(&p, 0));
        int rt = 0, drv = 0;
        BENCH_CUDA_OK(cudaRuntimeGetVersion(&rt));
        BENCH_CUDA_OK(cudaDriverGetVersion(&drv));
        char date[32];
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        fprintf(f, "{\n  \"meta\": {\"gpu\": \"%s\", \"sm_count\": %d, \"cuda_runtime\": \"%d.%d\", \"driver_cuda\": "
                   "\"%d.%d\", \"commit\": \"%s\", \"date\": \"%s\", \"command\": \"%s\", \"reps\": %d, "
                   "\"copy_GBps\": %.1f, \"params\": %lld, \"tensors\": %d},\n  \"results\": [\n",
                p.name, p.multiProcessorCount, rt / 1000, (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10, commit, date,
                command, reps, copy_gbps, (long long)b.nparams, NT);
        for (int r = 0; r < nrows; r++)
            fprintf(f, "    {\"op\": \"%s\", \"what\": \"%s\", \"bytes_per_param\": %.0f, \"ms\": %.5f, \"GBps\": %.1f}%s\n",
                    rows[r].op, rows[r].what, rows[r].bytes_per_param, rows[r].ms, rows[r].gbps,
                    r + 1 < nrows ? "," : "");
        fprintf(f, "  ]\n}\n");
        fclose(f);
    }
    return 0;
}
