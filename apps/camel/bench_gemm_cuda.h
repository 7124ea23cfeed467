/* What camel bench gemm (bench_gemm_run.c) and camel tune gemm (bench_gemm_tune.c) share on
 * the CUDA side: device buffers, one case's descriptors and cuBLAS plans, timing with L2
 * flushes, the output check and the JSON meta record. CUDA builds only; the including file
 * defines BENCH_WHO and BENCH_HINT (bench_cuda.h). */
#ifndef CAMEL_BENCH_GEMM_CUDA_H
#define CAMEL_BENCH_GEMM_CUDA_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* cublasLt.h declares f() */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#pragma GCC diagnostic pop
#include <stdio.h>
#include <stdlib.h>

#include "bench_cuda.h"
#include "bench_gemm.h"

#define FLUSH_BYTES ((size_t)256 << 20)
#define LT_WORKSPACE ((size_t)32 << 20)
#define FILL_PERIOD 1048573 /* a prime: the repeated random block lines up with no matrix dimension */
#define SAMPLE_ELEMS ((int64_t)1 << 22)
#define WARMUP 3
#define ALIGN 256

typedef struct bg_state {
    cml_ctx *ctx;
    cudaStream_t st;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *lt_ws, *flush;
    cudaEvent_t ev0, ev1;
    void *A, *B, *D_ours, *D_ref;
    float *scales; /* device: a_scale, b_scale of the fp8 cases */
    int filled;    /* the bg_dtype A and B hold now, -1 for none */
    int reps;
    size_t fill_a[BG_DTYPE_COUNT], fill_b[BG_DTYPE_COUNT]; /* bytes of A, B each dtype's cases read */
} bg_state;

/* One case made ready: descriptors and pointers of each problem, the reference's plans. */
typedef struct bg_prep {
    const bg_case *c;
    int count; /* problems (1, or the group's) */
    bool grouped;
    cml_gemm_desc desc[BG_MAX_GROUP];
    const void *a[BG_MAX_GROUP], *b[BG_MAX_GROUP];
    void *d_ours[BG_MAX_GROUP], *d_ref[BG_MAX_GROUP];
    /* cuBLASLt plan per problem (not used for f32, which calls cublasSgemm) */
    cublasLtMatmulDesc_t md[BG_MAX_GROUP];
    cublasLtMatrixLayout_t la[BG_MAX_GROUP], lb[BG_MAX_GROUP], lc[BG_MAX_GROUP];
    cublasLtMatmulAlgo_t algo[BG_MAX_GROUP];
    char ref_error[200];
} bg_prep;

typedef struct bg_result {
    const bg_case *c;
    char path[48];
    double ours_ms, ref_ms, ours_tf, ref_tf, rel_diff; /* NAN where not measured */
    char error[240];
} bg_result;


/* Allocates buffers for the cases and creates the handles; false with a message on failure. */
bool bg_state_open(bg_state *s, const bg_case *cases, int n, int reps);
/* Fills A and B with random values of dt's input type (once per dtype in a row). */
void bg_state_fill(bg_state *s, bg_dtype dt);
/* Fills p for case c over the state's buffers; false (with p->ref_error) when the reference cannot run it. */
bool bg_prep_case(bg_state *s, const bg_case *c, bg_prep *p);
void bg_prep_free(bg_prep *p);
/* Median ms of ours (and, with ref, the reference's) over s->reps alternating calls, each after an
 * L2 flush, into r. False when a call of ours fails; a reference that fails is left out. */
bool bg_time(bg_state *s, bg_prep *p, bg_result *r, bool ref);
/* One call of ours (or, with ref, of the reference) after an L2 flush (memset to flush_byte), timed
 * by events into *ms; false when the call fails. */
bool bg_time_call(bg_state *s, bg_prep *p, bool ref, int flush_byte, float *ms);
/* The median of v[0..n) (sorts v). */
float bg_median(float *v, int n);
/* Poisons both outputs, runs each side once, and sets r->rel_diff (NAN without a reference). */
void bg_check_outputs(bg_state *s, bg_prep *p, bg_result *r);
/* The largest norm-wise difference between ours and the reference that is not flagged. */
double bg_diff_bound(bg_dtype d);
/* Opens o->json_path and writes {"meta": {...GPU, versions, commit, date, command, reps...},
 * "results": [ ; NULL (with a message) when the file cannot be opened. */
FILE *bg_json_open(const bg_options *o);
/* Ends the results list and the record, closes f and says where it went. */
void bg_json_close(FILE *f, const bg_options *o);

#endif
