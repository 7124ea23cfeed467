/* camel tune gemm (CUDA side): per case on the Hopper path, every valid tile configuration
 * (cml__gemm_sm90_config) timed the way camel bench gemm times (bench_gemm_cuda.h): a quick
 * pass over all, then the estimate's choice, the quick pass's best three and cuBLAS in turns;
 * the winner checked against cuBLAS, and the tuned table the library compiles in
 * (src/kernels/cuda/gemm/gemm_sm90_tuned.inc) written out. CUDA builds only. */
#define _POSIX_C_SOURCE 200809L
#ifdef CML_HAVE_CUDA
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_WHO "camel tune gemm"
#define BENCH_HINT "choose fewer or smaller cases (--set, --sizes)"
#include "bench_gemm_cuda.h"
#include "camel/camel.h"
#include "cli.h"
#include "kernels/cuda/cuda_kernels.h"

#define MAX_CONFIGS 400
#define FINALISTS 3
#define MIN_GAIN 0.98 /* a table entry only where the best is more than 2% faster than the estimate */

static const int WIDTHS[] = {256, 192, 160, 128};
static const int SPLITS[] = {1, 2, 3, 4, 6, 8, 12, 16};
/* CTAs a cluster and their tile columns (cml__gemm_sm90_config.cluster_n: 0 a column of tiles, 2 a 2 x 2 block) */
static const int CLUSTERS[][2] = {{1, 0}, {2, 0}, {4, 0}, {4, 2}};
static const int GROUP_MS[] = {8, 16};
/* tile rows and schedule: 128 cooperative, 128 ping-pong, 64 (always ping-pong) */
static const int ROWS[][2] = {{128, 0}, {128, 1}, {64, 0}};

typedef struct tune_result {
    const bg_case *c;
    cml__gemm_sm90_config est, best;
    double est_ms, best_ms, ref_ms, rel_diff;
    int tried;
    cml__gemm_sm90_config cfgs[MAX_CONFIGS]; /* the quick pass: every valid configuration and its median ms */
    double quick[MAX_CONFIGS];
    bool entry; /* goes into the table */
    char error[160];
} tune_result;

static bool same_config(const cml__gemm_sm90_config *a, const cml__gemm_sm90_config *b) {
    return a->bn == b->bn && a->splits == b->splits && a->cluster == b->cluster && a->group_m == b->group_m &&
           a->rows == b->rows && a->pingpong == b->pingpong && (a->cluster_n > 1) == (b->cluster_n > 1);
}

/* Median ms of our call with cfg forced (reps calls, each after an L2 flush); NAN on failure. */
static double time_config(bg_state *s, bg_prep *p, const cml__gemm_sm90_config *cfg, int reps) {
    bg_result r;
    memset(&r, 0, sizeof r);
    const int saved = s->reps;
    s->reps = reps;
    cml__gemm_sm90_force_config(cfg);
    const bool ok = bg_time(s, p, &r, false);
    cml__gemm_sm90_force_config(NULL);
    s->reps = saved;
    return ok ? r.ours_ms : NAN;
}

/* The finalists and cuBLAS in turns, one flushed call each per round, so that drifting clocks
 * touch every side alike: medians into ms[] (NAN for one that failed) and *ref_ms. */
static void time_finalists(bg_state *s, bg_prep *p, const cml__gemm_sm90_config *cfgs, int n, double *ms,
                           double *ref_ms) {
    static float t[FINALISTS + 2][BG_MAX_REPS];
    bool ok[FINALISTS + 2];
    bool ref_ok = p->ref_error[0] == '\0';
    for (int j = 0; j < n; j++) ok[j] = true;
    for (int i = -1; i < s->reps; i++) { /* round -1 warms every side up */
        for (int j = 0; j < n; j++) {
            cml__gemm_sm90_force_config(&cfgs[j]);
            ok[j] = ok[j] && bg_time_call(s, p, false, i, &t[j][i < 0 ? 0 : i]);
        }
        cml__gemm_sm90_force_config(NULL);
        ref_ok = ref_ok && bg_time_call(s, p, true, i, &t[n][i < 0 ? 0 : i]);
    }
    for (int j = 0; j < n; j++) ms[j] = ok[j] ? bg_median(t[j], s->reps) : NAN;
    *ref_ms = ref_ok ? bg_median(t[n], s->reps) : NAN;
}

static void tune_case(bg_state *s, bg_prep *p, tune_result *t) {
    const cml_gemm_desc *d = &p->desc[0];
    cml__gemm_sm90_config *cfgs = t->cfgs;
    double *quick = t->quick;
    int n = 0;
    for (size_t w = 0; w < sizeof WIDTHS / sizeof *WIDTHS; w++)
        for (size_t k = 0; k < sizeof SPLITS / sizeof *SPLITS; k++)
            for (size_t cl = 0; cl < sizeof CLUSTERS / sizeof *CLUSTERS; cl++)
                for (size_t g = 0; g < sizeof GROUP_MS / sizeof *GROUP_MS; g++)
                    for (size_t r = 0; r < sizeof ROWS / sizeof *ROWS; r++) {
                        const cml__gemm_sm90_config c = {WIDTHS[w],  SPLITS[k],  CLUSTERS[cl][0], GROUP_MS[g],
                                                         ROWS[r][0], ROWS[r][1], CLUSTERS[cl][1]};
                        if (n < MAX_CONFIGS && cml__gemm_sm90_config_valid(d, &c)) cfgs[n++] = c;
                    }
    t->tried = n;
    const int quick_reps = s->reps / 4 > 3 ? s->reps / 4 : 3;
    for (int i = 0; i < n; i++) quick[i] = time_config(s, p, &cfgs[i], quick_reps);
    /* finalists: the estimate's configuration and the quick pass's best few, timed again in turns */
    cml__gemm_sm90_config final[FINALISTS + 1];
    double final_ms[FINALISTS + 1] = {0};
    int nf = 0;
    final[nf++] = t->est;
    for (int f = 0; f < FINALISTS; f++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int j = 0; j < nf; j++) taken = taken || same_config(&final[j], &cfgs[i]);
            if (!taken && !isnan(quick[i]) && (best < 0 || quick[i] < quick[best])) best = i;
        }
        if (best >= 0) final[nf++] = cfgs[best];
    }
    time_finalists(s, p, final, nf, final_ms, &t->ref_ms);
    t->est_ms = final_ms[0];
    t->best_ms = INFINITY;
    for (int j = 0; j < nf; j++)
        if (final_ms[j] < t->best_ms) t->best_ms = final_ms[j], t->best = final[j];
    if (isinf(t->best_ms)) {
        snprintf(t->error, sizeof t->error, "every configuration failed: %s", cml_last_error());
        return;
    }
    /* the winner's output against cuBLAS's */
    bg_result r;
    memset(&r, 0, sizeof r);
    r.rel_diff = NAN;
    cml__gemm_sm90_force_config(&t->best);
    bg_check_outputs(s, p, &r);
    cml__gemm_sm90_force_config(NULL);
    t->rel_diff = r.rel_diff;
    const bool output_ok = isnan(r.rel_diff) || r.rel_diff <= bg_diff_bound(t->c->dt);
    if (!output_ok) snprintf(t->error, sizeof t->error, "the winner's output differs from cuBLAS's (%.3g)", r.rel_diff);
    t->entry = output_ok && !same_config(&t->best, &t->est) && t->best_ms < MIN_GAIN * t->est_ms;
}

static const char *kind_name(bg_dtype dt) {
    return dt == BG_BF16 ? "BF16" : dt == BG_F16 ? "F16" : dt == BG_TF32 ? "TF32" : "E4M3";
}

static bool write_table(const char *path, const bg_options *o, const tune_result *res, int n) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        perror(tmp);
        return false;
    }
    struct cudaDeviceProp prop;
    BENCH_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    fprintf(f,
            "/* The sm90 GEMM's tuned table (included by gemm_sm90.cu): one line per problem,\n"
            " * CML_SM90_TUNED(kind, op_a, op_b, M, N, K, batch, tile rows, tile width, K splits, cluster, group_m\n"
            " * [, 1: 128-row tiles in ping-pong]),\n"
            " * for problems where a measured configuration beat the cost estimate's by more than 2%%.\n"
            " * Written by `%s` on %s (%d SMs), %s.\n"
            " * Regenerate it with that command (--out this file) on the target GPU, then rebuild.\n"
            " * Used only on GPUs with this many SMs: */\n#define CML_SM90_TUNED_SMS %d\n",
            o->command, prop.name, prop.multiProcessorCount, date, prop.multiProcessorCount);
    for (int i = 0; i < n; i++) {
        const tune_result *t = &res[i];
        if (!t->entry) continue;
        const bg_case *c = t->c;
        fprintf(f, "CML_SM90_TUNED(%s, '%c', '%c', %lld, %lld, %lld, %lld, %d, %d, %d, %d, %d%s) /* %.4f -> %.4f ms */\n",
                kind_name(c->dt), c->op_a == CML_OP_T ? 'T' : 'N', c->op_b == CML_OP_T ? 'T' : 'N', (long long)c->M,
                (long long)c->N, (long long)c->K, (long long)c->batch, t->best.rows, t->best.bn, t->best.splits, t->best.cluster, t->best.group_m,
                t->best.cluster_n == 2 ? ", 0, 2" : t->best.pingpong ? ", 1" : "", t->est_ms, t->best_ms);
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) { /* replaced whole or not at all */
        perror(path);
        return false;
    }
    printf("wrote %s\n", path);
    return true;
}

static void json_config(FILE *f, const char *key, const cml__gemm_sm90_config *c) {
    fprintf(f,
            ", \"%s\": {\"rows\": %d, \"bn\": %d, \"splits\": %d, \"cluster\": %d, \"group_m\": %d, \"pingpong\": %d, "
            "\"cluster_n\": %d}",
            key, c->rows, c->bn, c->splits, c->cluster, c->group_m, c->pingpong, c->cluster_n > 1 ? c->cluster_n : 1);
}

static void json_ms(FILE *f, const char *key, double v) {
    if (isnan(v) || isinf(v)) fprintf(f, ", \"%s\": null", key);
    else fprintf(f, ", \"%s\": %.6g", key, v);
}

static void write_json(const bg_options *o, const tune_result *res, int n) {
    FILE *f = bg_json_open(o);
    if (!f) return;
    for (int i = 0; i < n; i++) {
        const tune_result *t = &res[i];
        const bg_case *c = t->c;
        const double flop = bg_case_flop(c);
        fprintf(f,
                "%s\n  {\"family\": \"gemm_tune\", \"op\": \"%s\", \"dtype\": \"%s\", \"set\": \"%s\", \"name\": \"%s\", "
                "\"shape\": {\"M\": %lld, \"N\": %lld, \"K\": %lld, \"batch\": %lld, \"op_a\": \"%c\", \"op_b\": \"%c\"}, "
                "\"configs_tried\": %d, \"table_entry\": %s",
                i ? "," : "", c->op, bg_dtype_name(c->dt), bg_set_name(c->set), c->name, (long long)c->M,
                (long long)c->N, (long long)c->K, (long long)c->batch, c->op_a == CML_OP_T ? 'T' : 'N',
                c->op_b == CML_OP_T ? 'T' : 'N', t->tried, t->entry ? "true" : "false");
        json_config(f, "estimate", &t->est);
        json_config(f, "best", &t->best);
        json_ms(f, "estimate_ms", t->est_ms);
        json_ms(f, "best_ms", t->best_ms);
        json_ms(f, "ref_ms", t->ref_ms);
        json_ms(f, "estimate_tflops", flop / t->est_ms * 1e-9);
        json_ms(f, "best_tflops", flop / t->best_ms * 1e-9);
        json_ms(f, "estimate_ratio", t->ref_ms / t->est_ms);
        json_ms(f, "best_ratio", t->ref_ms / t->best_ms);
        json_ms(f, "rel_diff", t->rel_diff);
        if (t->error[0]) fprintf(f, ", \"error\": \"%s\"", t->error);
        /* the quick pass, for studies of the configuration space (dev/gemm_sm90/README.md) */
        fprintf(f, ", \"quick_fields\": [\"rows\", \"bn\", \"splits\", \"cluster\", \"group_m\", \"pingpong\", \"cluster_n\", "
                   "\"ms\"], "
                   "\"quick\": [");
        for (int k = 0; k < t->tried; k++) {
            const cml__gemm_sm90_config *q = &t->cfgs[k];
            fprintf(f, "%s[%d, %d, %d, %d, %d, %d, %d, ", k ? ", " : "", q->rows, q->bn, q->splits, q->cluster,
                    q->group_m, q->pingpong, q->cluster_n > 1 ? q->cluster_n : 1);
            if (isnan(t->quick[k])) fprintf(f, "null]");
            else fprintf(f, "%.5g]", t->quick[k]);
        }
        fprintf(f, "]}");
    }
    bg_json_close(f, o);
}

int bg_tune(const bg_options *o, const char *table_path) {
    static bg_case all[BG_MAX_CASES], cases[BG_MAX_CASES];
    static tune_result res[BG_MAX_CASES];
    const int n_all = bg_make_cases(o, all, BG_MAX_CASES);
    bg_state s;
    if (!bg_state_open(&s, all, n_all, o->reps)) return 1;
    int n = 0;
    for (int i = 0; i < n_all; i++) { /* one GEMM per call on the sm90 path: what the table can describe */
        if (all[i].group_count || all[i].dt == BG_F32) continue;
        bg_prep p;
        bg_prep_case(&s, &all[i], &p);
        const char *path = cml__gemm_cuda_path_name(s.ctx, &p.desc[0], p.d_ours[0], p.a[0], p.b[0], NULL);
        if (strcmp(path, "sm90") == 0) cases[n++] = all[i];
        bg_prep_free(&p);
    }
    if (n == 0) {
        fprintf(stderr, "camel tune gemm: no selected case runs on the Hopper path (an sm_90 GPU, --dtype other than "
                        "f32, and --set other than grouped are needed)\n");
        return 2;
    }
    printf("camel tune gemm: %d cases, up to %d configurations each; the quick pass takes %d calls per "
           "configuration, the finalists %d\n",
           n, MAX_CONFIGS, o->reps / 4 > 3 ? o->reps / 4 : 3, o->reps);
    printf("%-5s %-8s %-10s %6s %6s %6s %5s %-3s %-19s %9s %-19s %9s %7s %7s %s\n", "dtype", "set", "name", "M", "N", "K",
           "batch", "ops", "estimate", "ms", "best", "ms", "ratio0", "ratio1", "table");
    cli_progress prog;
    cli_progress_start(&prog, "tune gemm", n, "cases");
    int entries = 0, failures = 0;
    double log0 = 0, log1 = 0;
    int n_ratio = 0;
    for (int i = 0; i < n; i++) {
        tune_result *t = &res[i];
        memset(t, 0, sizeof *t);
        t->c = &cases[i];
        t->est_ms = t->best_ms = t->ref_ms = t->rel_diff = NAN;
        bg_state_fill(&s, cases[i].dt);
        bg_prep p;
        bg_prep_case(&s, &cases[i], &p);
        t->est = cml__gemm_sm90_estimate_config(s.ctx, &p.desc[0]);
        tune_case(&s, &p, t);
        bg_prep_free(&p);
        entries += t->entry;
        failures += t->error[0] != '\0';
        if (t->ref_ms > 0 && t->est_ms > 0 && t->best_ms > 0) {
            log0 += log(t->ref_ms / t->est_ms), log1 += log(t->ref_ms / t->best_ms);
            n_ratio++;
        }
        cli_progress_finish(&prog);
        const bg_case *c = t->c;
        char est[64], best[64];
        snprintf(est, sizeof est, "%dx%dx%d c%d%s g%d%s", t->est.rows, t->est.bn, t->est.splits,
                 t->est.cluster_n == 2 ? 2 : t->est.cluster, t->est.cluster_n == 2 ? "x2" : "", t->est.group_m, t->est.pingpong ? " pp" : "");
        snprintf(best, sizeof best, "%dx%dx%d c%d%s g%d%s", t->best.rows, t->best.bn, t->best.splits,
                 t->best.cluster_n == 2 ? 2 : t->best.cluster, t->best.cluster_n == 2 ? "x2" : "", t->best.group_m, t->best.pingpong ? " pp" : "");
        printf("%-5s %-8s %-10.10s %6lld %6lld %6lld %5lld %c%c  %-19s %9.4f %-19s %9.4f %7.3f %7.3f %s%s%s\n",
               bg_dtype_name(c->dt), bg_set_name(c->set), c->name, (long long)c->M, (long long)c->N, (long long)c->K,
               (long long)c->batch, c->op_a == CML_OP_T ? 'T' : 'N', c->op_b == CML_OP_T ? 'T' : 'N', est, t->est_ms,
               best, t->best_ms, t->ref_ms / t->est_ms, t->ref_ms / t->best_ms, t->entry ? "yes" : "-",
               t->error[0] ? "  error: " : "", t->error);
        fflush(stdout);
        cli_progress_update(&prog, i + 1, NULL, 0);
    }
    cli_progress_finish(&prog);
    printf("\n(rows x width x splits, c = CTAs per cluster (c2x2: a 2 x 2 block of tiles), g = tile rows visited together, pp = 128-row ping-pong; ratio = cuBLAS ms / ours: 0 with the estimate, 1 with "
           "the best)\n%d of %d cases beat the estimate by more than 2%%; geometric mean of the ratio to cuBLAS %.3f -> "
           "%.3f over %d cases\n",
           entries, n, n_ratio ? exp(log0 / n_ratio) : NAN, n_ratio ? exp(log1 / n_ratio) : NAN, n_ratio);
    if (o->json_path) write_json(o, res, n);
    if (table_path && !write_table(table_path, o, res, n)) return 1;
    if (!table_path) printf("(no --out: the tuned table was not written)\n");
    return failures ? 1 : 0;
}
#else
typedef int bench_gemm_tune_needs_cuda; /* CPU builds: cmd_bench_gemm.c says that a CUDA build is needed */
#endif
