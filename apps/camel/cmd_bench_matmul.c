/* camel bench matmul: CPU matmul through camel (tensor op -> kernel layer ->
 * OpenBLAS) against calling cblas_sgemm directly on the same buffers. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "camel/camel.h"
#include "cli.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* First line of a command's output, or "unknown". */
static void command_line(const char *cmd, char *buf, size_t n) {
    snprintf(buf, n, "unknown");
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (fgets(buf, (int)n, p)) buf[strcspn(buf, "\n")] = '\0';
    else snprintf(buf, n, "unknown");
    pclose(p);
}

int cmd_bench_matmul(int argc, char **argv) {
    const char *sizes_text = "256,512,1024,2048", *json_path = NULL;
    int64_t reps = 15, threads = 0;
    cli_flag flags[] = {
        {"sizes", CLI_STRING, &sizes_text, "square sizes n (n x n times n x n), comma-separated"},
        {"reps", CLI_INT, &reps, "timed repetitions per size (the median is reported)"},
        {"threads", CLI_INT, &threads, "CPU threads (0 = default)"},
        {"json", CLI_STRING, &json_path, "write the results as JSON (bench/results format) to this file"},
    };
    int rc = cli_parse(argc, argv, flags, 4, "camel bench matmul [options]",
                       "Times cml_matmul on f32 CPU tensors against cblas_sgemm called directly on the same "
                       "buffers (random inputs, one warm-up, median of --reps runs) and prints GFLOP/s and the ratio.");
    if (rc) return rc == 1 ? 0 : rc;
    if (reps < 1 || reps > 100000) {
        fprintf(stderr, "camel: --reps must be in [1, 100000]\n");
        return 2;
    }
    if (threads > 0) cml_set_cpu_threads((int)threads);
    FILE *json = NULL;
    if (json_path && !(json = fopen(json_path, "w"))) {
        perror(json_path);
        return 1;
    }
    char cpu[256], commit[64], date[64];
    command_line("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'", cpu, sizeof cpu);
    command_line("git rev-parse --short HEAD 2>/dev/null", commit, sizeof commit);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    if (json)
        fprintf(json, "{\"meta\": {\"device\": \"cpu\", \"cpu\": \"%s\", \"threads\": %d, \"blas\": \"%s\", "
                      "\"commit\": \"%s\", \"date\": \"%s\", \"command\": \"camel bench matmul --sizes %s --reps %lld\"},\n"
                      " \"results\": [",
                cpu, cml_cpu_threads(), cml_blas_info(), commit, date, sizes_text, (long long)reps);
    printf("CPU matmul f32 (%s, %d threads), median of %lld\n", cpu, cml_cpu_threads(), (long long)reps);
    printf("%8s %14s %14s %8s\n", "n", "camel GFLOP/s", "BLAS GFLOP/s", "ratio");
    double *t_ours = malloc((size_t)reps * sizeof(double)), *t_ref = malloc((size_t)reps * sizeof(double));
    if (!t_ours || !t_ref) {
        fprintf(stderr, "camel: out of memory\n");
        free(t_ours);
        free(t_ref);
        if (json) fclose(json);
        return 1;
    }
    cml_rng rng;
    cml_rng_init(&rng, 42);
    int first = 1, status = 0;
    for (const char *p = sizes_text; *p && status == 0;) {
        char *end = NULL;
        long long n = strtoll(p, &end, 10);
        if (end == p || n < 1) {
            fprintf(stderr, "camel: --sizes must be positive integers separated by commas\n");
            status = 2;
            break;
        }
        p = *end == ',' ? end + 1 : end;
        int64_t shape[2] = {n, n};
        cml_tensor *a = cml_tensor_randn(2, shape, 0, 1, &rng, CML_F32, CML_DEVICE_CPU);
        cml_tensor *b = cml_tensor_randn(2, shape, 0, 1, &rng, CML_F32, CML_DEVICE_CPU);
        float *c = malloc((size_t)(n * n) * sizeof(float));
        if (!a || !b || !c) {
            status = cli_fail("allocating the operands", NULL);
            cml_tensor_release_all((cml_tensor *[]){a, b}, 2);
            free(c);
            break;
        }
        const float *A = cml_tensor_data(a), *B = cml_tensor_data(b);
        for (int64_t r = -1; r < reps; r++) { /* r = -1 is the warm-up; alternate so both see the same machine state */
            double t = cli_now();
            cml_tensor *out = cml_matmul(a, b);
            double t_mid = cli_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, A, (int)n, B, (int)n,
                        0.0f, c, (int)n);
            double t_end = cli_now();
            if (!out) {
                status = cli_fail("cml_matmul", NULL);
                break;
            }
            cml_tensor_release(out);
            if (r >= 0) {
                t_ours[r] = t_mid - t;
                t_ref[r] = t_end - t_mid;
            }
        }
        if (status == 0) {
            double flops = 2.0 * (double)n * (double)n * (double)n;
            double ours = flops / median(t_ours, (int)reps) * 1e-9, ref = flops / median(t_ref, (int)reps) * 1e-9;
            printf("%8lld %14.1f %14.1f %8.3f\n", n, ours, ref, ours / ref);
            if (json)
                fprintf(json, "%s\n  {\"family\": \"gemm\", \"op\": \"matmul\", \"dtype\": \"f32\", \"device\": \"cpu\", "
                              "\"shape\": {\"M\": %lld, \"N\": %lld, \"K\": %lld}, \"ours\": %.2f, \"reference\": %.2f, "
                              "\"ref_name\": \"OpenBLAS cblas_sgemm\", \"unit\": \"GFLOP/s\", \"ratio\": %.4f}",
                        first ? "" : ",", n, n, n, ours, ref, ours / ref);
            first = 0;
        }
        cml_tensor_release_all((cml_tensor *[]){a, b}, 2);
        free(c);
    }
    if (json) {
        fprintf(json, "\n]}\n");
        fclose(json);
    }
    free(t_ours);
    free(t_ref);
    return status;
}
