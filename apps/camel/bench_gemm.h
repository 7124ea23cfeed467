/* camel bench gemm (cmd_bench_gemm.c): the cases (bench_gemm_cases.c) and the
 * CUDA runner timing cml_gemm against cuBLAS / cuBLASLt (bench_gemm_run.c,
 * CUDA builds only). */
#ifndef CAMEL_BENCH_GEMM_H
#define CAMEL_BENCH_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "camel/kernels.h"

#define BG_MAX_REPS 1000
#define BG_MAX_SIZES 32
#define BG_MAX_CASES 1024
#define BG_MAX_GROUP 8

typedef enum bg_dtype { BG_BF16, BG_F16, BG_TF32, BG_F32, BG_E4M3, BG_DTYPE_COUNT } bg_dtype;
typedef enum bg_set { BG_SQUARE, BG_GPT2, BG_ODD, BG_BATCHED, BG_GROUPED, BG_SET_COUNT } bg_set;

typedef struct bg_case {
    bg_set set;
    bg_dtype dt;
    const char *op;   /* the record's "op": gemm, gpt2_fwd, gpt2_dx, gpt2_dw, batched, batched_as_one,
                       * batched_same_flops, grouped, grouped_as_one */
    const char *name; /* a label ("qkv", "64x1024^3", ...) */
    cml_op op_a, op_b;
    int64_t M, N, K, batch;     /* grouped: M is the sum of group_m */
    int group_count;            /* grouped: problems of M = group_m[i], sharing N and K; else 0 */
    int64_t group_m[BG_MAX_GROUP];
} bg_case;

typedef struct bg_options {
    bool dtypes[BG_DTYPE_COUNT], sets[BG_SET_COUNT];
    int64_t sizes[BG_MAX_SIZES];
    int n_sizes;
    cml_op ops[4][2];
    int n_ops;
    int64_t max_f32;
    int64_t tokens; /* the gpt2 set's M (forward, dX) or K (dW) */
    int reps;
    const char *json_path, *commit;
    char command[1024];
} bg_options;

const char *bg_dtype_name(bg_dtype dt);
const char *bg_set_name(bg_set s);
/* Parsers of the comma-separated flags; false / -1 on a bad word. */
bool bg_parse_dtypes(const char *text, bool out[BG_DTYPE_COUNT]);
bool bg_parse_sets(const char *text, bool out[BG_SET_COUNT]);
int bg_parse_ints(const char *text, int64_t *out, int max);
int bg_parse_ops(const char *text, cml_op (*out)[2], int max);

/* The selected cases, in the order they run (set by set, dtype by dtype); at most max. */
int bg_make_cases(const bg_options *o, bg_case *out, int max);

/* 2 M N K over every problem and batch. */
double bg_case_flop(const bg_case *c);

/* Runs the cases on CUDA device 0: table on stdout, JSON to o->json_path. 0 when every
 * call of ours succeeded, 1 otherwise (bench_gemm_run.c; CUDA builds only). */
int bg_run(const bg_options *o);

/* camel tune gemm over the selected cases (bench_gemm_tune.c; CUDA builds only): table on
 * stdout, the tuned table to table_path (may be NULL), JSON to o->json_path. 0 on success. */
int bg_tune(const bg_options *o, const char *table_path);

#endif
