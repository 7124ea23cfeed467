/* camel bench gemm: cml_gemm against cuBLAS / cuBLASLt, in the same process on
 * the same buffers (DESIGN.md section 5); and camel tune gemm, which times the
 * Hopper path's tile configurations the same way (bench_gemm_tune.c).
 *
 * References: cuBLASLt (cublasLtMatmul, the heuristic's first algorithm, 32 MiB
 * workspace) for bf16 and fp16 (f32 accumulation, 16-bit output), tf32
 * (CUBLAS_COMPUTE_32F_FAST_TF32, f32 output) and fp8 e4m3 (per-tensor scales,
 * bf16 output; cuBLASLt's fp8 needs its "TN" layout, which in our row-major
 * terms is op_a = N, op_b = T, so every fp8 case uses that); cublasSgemm
 * (strided batched; CUBLAS_DEFAULT_MATH, no tf32) for exact f32.
 *
 * Method: inputs filled once per dtype with random values (never zeros; a
 * prime-length random block repeated over the buffer); for each case 3 warm-up
 * calls of each side, then --reps timed calls of each, alternating ours and
 * the reference, each after an untimed 256 MiB memset (an L2 flush), CUDA
 * events around the call on the one stream both use; the median is reported.
 * Outputs are poisoned, computed once by each side and compared (norm-wise
 * relative difference over sampled rows; flagged when above 1e-2 for 16-bit
 * and fp8 outputs, 1e-3 for tf32, 1e-5 for f32).
 *
 * Sets: square (--sizes; f32 and tf32 stop at --max-f32), gpt2 (GPT-2 124M
 * training GEMMs at --tokens tokens, 8192 by default: forward with weights stored (N, K), op_b = T;
 * dX = dY W, op N/N; dW = dY^T X, op_a = T), odd (3000x5000x1000, 1025^3),
 * batched (64 x 1024^3 strided; the same problems as one 65536x1024x1024 GEMM, A's stacked, as grouped
 * does; and the same flops as one 8192x8192x1024),
 * grouped (8 problems of mixed M through cml_gemm_grouped against one
 * cuBLASLt call per problem, and the same problems as one GEMM).
 * In a build without CUDA the command parses its flags (--help works) and then
 * says that it needs a CUDA build (exit status 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gemm.h"
#include "camel/camel.h"
#include "cli.h"

static int usage_error(const char *cmd, const char *msg, const char *value) {
    fprintf(stderr, "camel %s: %s \"%s\"\nRun `camel %s --help` for the options.\n", cmd, msg, value, cmd);
    return 2;
}

/* camel bench gemm and camel tune gemm: the same cases and method; tune adds --out. */
static int gemm_command(int argc, char **argv, bool tune) {
    const char *cmd = tune ? "tune gemm" : "bench gemm";
    const char *dtypes = tune ? "bf16,fp16,tf32,e4m3" : "bf16,fp16,tf32,f32,e4m3";
    const char *sets = tune ? "square,gpt2,odd,batched" : "square";
    const char *sizes = tune ? "1024,2048,4096,8192,16384" : "256,512,1024,2048,4096,8192,16384";
    const char *ops = "NN", *json_path = NULL, *commit = NULL, *out_path = NULL;
    int64_t reps = 20, max_f32 = 8192, tokens = 8192;
    cli_flag flags[] = {
        {"dtype", CLI_STRING, &dtypes, "input types, comma-separated: bf16, fp16, tf32, f32, e4m3"},
        {"set", CLI_STRING, &sets, "cases, comma-separated: square, gpt2, odd, batched, grouped, all"},
        {"sizes", CLI_STRING, &sizes, "sizes n of the square set (n x n x n)"},
        {"ops", CLI_STRING, &ops, "op_a op_b pairs for the square and odd sets, comma-separated (NN, NT, TN, TT)"},
        {"max-f32", CLI_INT, &max_f32, "largest square size for f32 and tf32 (they are slow)"},
        {"tokens", CLI_INT, &tokens, "tokens of the gpt2 set (its GEMMs' M, or K for the weight gradients)"},
        {"reps", CLI_INT, &reps, "timed repetitions per case and side (median reported; at least 20 for results)"},
        {"json", CLI_STRING, &json_path, "write the results as JSON (DESIGN.md section 5) to this file"},
        {"commit", CLI_STRING, &commit, "commit recorded in the JSON meta (default: git rev-parse --short HEAD)"},
        {"out", CLI_STRING, &out_path,
         "write the tuned table here (src/kernels/cuda/gemm/gemm_sm90_tuned.inc in a source tree; rebuild after)"},
    };
    const int n_flags = (int)(sizeof flags / sizeof flags[0]) - (tune ? 0 : 1);
    int rc = tune ? cli_parse(argc, argv, flags, n_flags, "camel tune gemm [options]",
                              "Tunes the Hopper GEMM path's tile configuration per problem: for each selected case "
                              "that runs on it (one GEMM, not grouped), times every valid configuration (tile width "
                              "256/192/160/128, tile height 128/64, 128-row tiles cooperative or in ping-pong, K splits "
                              "1-16, clusters of 1/2/4 CTAs (4: a column of tiles or a 2 x 2 block; 160 wide only), "
                              "tile rows visited together 8/16: a "
                              "quick pass with --reps/4 calls, then the 3 best, the cost estimate's choice and cuBLAS "
                              "in turns for --reps rounds), checks the winner's output against cuBLAS, and writes the "
                              "problems whose best beat the estimate by more than 2% as the table the library "
                              "compiles in (--out). Prints the estimate's and the best time per case and their ratio "
                              "to cuBLAS.")
                     : cli_parse(argc, argv, flags, n_flags, "camel bench gemm [options]",
                                 "Times cml_gemm on a CUDA device against cuBLASLt (bf16, fp16, tf32, fp8 e4m3) and "
                                 "cublasSgemm (f32) on the same buffers: random inputs, warm-up, the median of --reps "
                                 "calls of each side, each after an L2 flush; outputs compared once per case. Prints "
                                 "ms, TFLOP/s of both sides and their ratio (ours / reference).");
    if (rc) return rc == 1 ? 0 : rc;
    if (reps < 1 || reps > BG_MAX_REPS) {
        fprintf(stderr, "camel %s: --reps must be in [1, %d], got %lld\n", cmd, BG_MAX_REPS, (long long)reps);
        return 2;
    }
    bg_options o;
    memset(&o, 0, sizeof o);
    o.reps = (int)reps;
    o.max_f32 = max_f32;
    if (tokens < 1 || tokens > ((int64_t)1 << 20)) {
        fprintf(stderr, "camel %s: --tokens must be in [1, 1048576], got %lld\n", cmd, (long long)tokens);
        return 2;
    }
    o.tokens = tokens;
    if (!bg_parse_dtypes(dtypes, o.dtypes))
        return usage_error(cmd, "--dtype: expected a list of bf16, fp16, tf32, f32, e4m3; got", dtypes);
    if (!bg_parse_sets(sets, o.sets))
        return usage_error(cmd, "--set: expected a list of square, gpt2, odd, batched, grouped, all; got", sets);
    o.n_sizes = bg_parse_ints(sizes, o.sizes, BG_MAX_SIZES);
    if (o.n_sizes < 0) return usage_error(cmd, "--sizes: expected positive integers separated by commas; got", sizes);
    o.n_ops = bg_parse_ops(ops, o.ops, 4);
    if (o.n_ops <= 0) return usage_error(cmd, "--ops: expected a list of NN, NT, TN, TT; got", ops);
    o.json_path = json_path;
    o.commit = commit;
    size_t used = 0;
    o.command[0] = '\0';
    for (int i = -3; i < argc && used + 2 < sizeof o.command; i++) { /* "camel bench gemm" + the flags */
        const char *w = i == -3 ? "camel" : i == -2 ? (tune ? "tune" : "bench") : i == -1 ? "gemm" : argv[i];
        int n = snprintf(o.command + used, sizeof o.command - used, "%s%s", used ? " " : "", w);
        if (n < 0) break;
        used += (size_t)n < sizeof o.command - used ? (size_t)n : sizeof o.command - used - 1;
    }
#ifdef CML_HAVE_CUDA
    return tune ? bg_tune(&o, out_path) : bg_run(&o);
#else
    (void)out_path;
    fprintf(stderr, "camel %s: needs a CUDA build (this camel was built without CUDA)\n"
                    "hint: configure with -DCML_CUDA=ON on a machine with nvcc and a GPU\n", cmd);
    return 1;
#endif
}

int cmd_bench_gemm(int argc, char **argv) { return gemm_command(argc, argv, false); }
int cmd_tune_gemm(int argc, char **argv) { return gemm_command(argc, argv, true); }
