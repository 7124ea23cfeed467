/* cml_reduce against float64 references over (outer, n, inner) shapes that
 * exercise the row path (inner == 1), the column-block path (inner > 1, with
 * more than one block) and the parallel split; exact checks for MAX/MIN/ARG*. */
#include "kernel_test_util.h"

static const int64_t shapes[][3] = {
    {1, 1, 1}, {1, 7, 1}, {3, 127, 1}, {2, 1025, 1}, {5, 1, 7}, {4, 33, 127}, {1, 1025, 300}, {64, 1000, 1}, {2, 5, 1025},
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

/* Reference over one (o, i) column: values v[0..n). */
static double ref_reduce(cml_reduce_op op, const double *v, int64_t n, int correction, int64_t *arg) {
    double sum = 0, sumsq = 0, best = v[0];
    *arg = 0;
    for (int64_t j = 0; j < n; j++) {
        sum += v[j];
        sumsq += v[j] * v[j];
        bool better = op == CML_REDUCE_MAX || op == CML_REDUCE_ARGMAX ? v[j] > best : v[j] < best;
        if (!isnan(best) && (isnan(v[j]) || better)) {
            best = v[j];
            *arg = j;
        }
    }
    double mean = sum / (double)n, ss = 0;
    for (int64_t j = 0; j < n; j++) ss += (v[j] - mean) * (v[j] - mean);
    switch (op) {
    case CML_REDUCE_SUM: return sum;
    case CML_REDUCE_MEAN: return mean;
    case CML_REDUCE_SUMSQ: return sumsq;
    case CML_REDUCE_VAR: return ss / (double)(n - correction);
    default: return best;
    }
}

static void run_reduce(cml_reduce_op op, const int64_t *shape, cml_dtype dt, float lo, float hi, int correction,
                       cml_rng *rng) {
    int64_t outer = shape[0], n = shape[1], inner = shape[2];
    int64_t nx = outer * n * inner, ny = outer * inner;
    bool is_arg = op == CML_REDUCE_ARGMAX || op == CML_REDUCE_ARGMIN;
    cml_dtype ydt = is_arg ? CML_I64 : dt;
    cml_layout xl = kt_layout(1, &nx), yl = kt_layout(1, &ny);
    kt_view x = kt_view_alloc(xl, dt), y = kt_view_alloc(yl, ydt);
    kt_fill_uniform(&x, lo, hi, rng);
    CHECK_OK(cml_reduce(kt_ctx(), op, y.data, ydt, x.data, dt, outer, n, inner, correction));
    float *out = kt_malloc((size_t)ny * sizeof *out);
    double *ref = kt_malloc((size_t)ny * sizeof *ref), *col = kt_malloc((size_t)n * sizeof *col);
    int wrong_exact = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t j = 0; j < n; j++) col[j] = kt_get(&x, (o * n + j) * inner + i);
            int64_t arg, k = o * inner + i;
            ref[k] = ref_reduce(op, col, n, correction, &arg);
            if (is_arg) {
                wrong_exact += ((int64_t *)y.data)[k] != arg;
                out[k] = (float)ref[k];
            } else {
                out[k] = (float)kt_get(&y, k);
                if (op == CML_REDUCE_MAX || op == CML_REDUCE_MIN) wrong_exact += out[k] != (float)ref[k];
            }
        }
    CHECK_MSG(wrong_exact == 0, "reduce op=%d shape=(%lld,%lld,%lld) %s: %d wrong maxima/indices", (int)op,
              (long long)outer, (long long)n, (long long)inner, cml_dtype_name(dt), wrong_exact);
    if (!(op == CML_REDUCE_VAR && n - correction <= 0))
        KT_CHECK_CLOSE(out, ref, ny, kt_tol(dt), "reduce op=%d shape=(%lld,%lld,%lld) %s", (int)op, (long long)outer,
                       (long long)n, (long long)inner, cml_dtype_name(dt));
    free(out);
    free(ref);
    free(col);
    kt_view_free(&x);
    kt_view_free(&y);
}

static void test_reduce_f32(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 10);
    for (int op = 0; op < CML_REDUCE_OP_COUNT; op++)
        for (int s = 0; s < NSHAPES; s++) run_reduce((cml_reduce_op)op, shapes[s], CML_F32, -2.0f, 3.0f, 1, &rng);
}

static void test_reduce_narrow_dtypes(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 11);
    for (int op = 0; op < CML_REDUCE_OP_COUNT; op++) {
        run_reduce((cml_reduce_op)op, shapes[5], CML_BF16, -2.0f, 3.0f, 1, &rng);
        run_reduce((cml_reduce_op)op, shapes[3], CML_F16, -2.0f, 3.0f, 1, &rng);
    }
    /* bf16 has few values: ties in ARGMAX are common, and the first index must win */
    run_reduce(CML_REDUCE_ARGMAX, shapes[7], CML_BF16, 0.0f, 2.0f, 0, &rng);
    run_reduce(CML_REDUCE_ARGMIN, shapes[5], CML_BF16, 0.0f, 2.0f, 0, &rng);
}

/* Welford in double keeps VAR accurate when the mean dwarfs the spread. */
static void test_var_large_mean(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 12);
    run_reduce(CML_REDUCE_VAR, shapes[3], CML_F32, 10000.0f, 10001.0f, 1, &rng);
    run_reduce(CML_REDUCE_VAR, shapes[5], CML_F32, 10000.0f, 10001.0f, 0, &rng);
    run_reduce(CML_REDUCE_VAR, shapes[4], CML_F32, -1.0f, 1.0f, 0, &rng); /* n = 1, correction 0: zero */
}

static void test_nan_wins(void) {
    float x[2 * 5] = {1, NAN, 7, 2, NAN, /* row 2 */ 3, 9, 1, 4, 2};
    float y[2];
    int64_t idx[2];
    cml_ctx *ctx = kt_ctx();
    CHECK_OK(cml_reduce(ctx, CML_REDUCE_MAX, y, CML_F32, x, CML_F32, 2, 5, 1, 0));
    CHECK(isnan(y[0]) && y[1] == 9);
    CHECK_OK(cml_reduce(ctx, CML_REDUCE_MIN, y, CML_F32, x, CML_F32, 2, 5, 1, 0));
    CHECK(isnan(y[0]) && y[1] == 1);
    CHECK_OK(cml_reduce(ctx, CML_REDUCE_ARGMAX, idx, CML_I64, x, CML_F32, 2, 5, 1, 0));
    CHECK(idx[0] == 1 && idx[1] == 1);
    CHECK_OK(cml_reduce(ctx, CML_REDUCE_ARGMIN, idx, CML_I64, x, CML_F32, 2, 5, 1, 0));
    CHECK(idx[0] == 1 && idx[1] == 2);
    /* the same through the column path: (1, 5, 2) */
    float xc[10] = {1, 3, NAN, 9, 7, 1, 2, 4, NAN, 2};
    CHECK_OK(cml_reduce(ctx, CML_REDUCE_ARGMAX, idx, CML_I64, xc, CML_F32, 1, 5, 2, 0));
    CHECK(idx[0] == 1 && idx[1] == 1);
    CHECK_OK(cml_reduce(ctx, CML_REDUCE_SUM, y, CML_F32, xc, CML_F32, 1, 5, 2, 0));
    CHECK(isnan(y[0]) && y[1] == 19);
}

static void test_deterministic(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 13);
    int64_t n = 64 * 4097 * 3;
    float *x = kt_malloc((size_t)n * 4), y1[64 * 3], y2[64 * 3];
    th_fill_uniform(x, n, -1, 1, &rng);
    for (int op = 0; op < CML_REDUCE_OP_COUNT; op++) {
        if (op == CML_REDUCE_ARGMAX || op == CML_REDUCE_ARGMIN) continue;
        th_poison(y1, sizeof y1);
        th_poison(y2, sizeof y2);
        CHECK_OK(cml_reduce(kt_ctx(), (cml_reduce_op)op, y1, CML_F32, x, CML_F32, 64, 4097, 3, 1));
        CHECK_OK(cml_reduce(kt_ctx(), (cml_reduce_op)op, y2, CML_F32, x, CML_F32, 64, 4097, 3, 1));
        CHECK(memcmp(y1, y2, sizeof y1) == 0);
    }
    free(x);
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float x[8] = {0}, y[8];
    int64_t idx[8];
    CHECK_STATUS(cml_reduce(ctx, CML_REDUCE_SUM, y, CML_F32, x, CML_F32, 2, 0, 4, 0), CML_ERR_INVALID_ARG,
                 "cml_reduce: n=0 must be >= 1");
    CHECK_STATUS(cml_reduce(ctx, CML_REDUCE_SUM, y, CML_F32, x, CML_F32, -1, 2, 4, 0), CML_ERR_INVALID_ARG,
                 "cml_reduce: outer=-1 must be >= 0");
    CHECK_STATUS(cml_reduce(ctx, CML_REDUCE_ARGMAX, y, CML_F32, x, CML_F32, 2, 4, 1, 0), CML_ERR_DTYPE,
                 "cml_reduce: y_dtype=f32 must be i64 for ARGMAX");
    CHECK_STATUS(cml_reduce(ctx, CML_REDUCE_MEAN, idx, CML_I64, x, CML_F32, 2, 4, 1, 0), CML_ERR_DTYPE,
                 "y_dtype=i64 must equal x_dtype=f32 for MEAN");
    CHECK_STATUS(cml_reduce(ctx, CML_REDUCE_SUM, y, CML_F32, NULL, CML_F32, 2, 4, 1, 0), CML_ERR_INVALID_ARG,
                 "cml_reduce: x must not be NULL");
    CHECK_STATUS(cml_reduce(ctx, (cml_reduce_op)17, y, CML_F32, x, CML_F32, 2, 4, 1, 0), CML_ERR_INVALID_ARG,
                 "op=17");
    CHECK_STATUS(cml_reduce(NULL, CML_REDUCE_SUM, y, CML_F32, x, CML_F32, 2, 4, 1, 0), CML_ERR_INVALID_ARG,
                 "ctx must not be NULL");
}

int main(void) {
    RUN(test_reduce_f32);
    RUN(test_reduce_narrow_dtypes);
    RUN(test_var_large_mean);
    RUN(test_nan_wins);
    RUN(test_deterministic);
    RUN(test_errors);
    return kt_finish();
}
