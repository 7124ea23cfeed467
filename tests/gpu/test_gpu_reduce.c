/* GPU tests of cml_reduce (src/kernels/cuda/reduce/reduce.cu) against the CPU
 * reference on random inputs: every op and dtype over rows (rows x cols in
 * {1x1, 7x127, 3x1025, 127x4097, 2x262144}), columns (inner > 1, including
 * long columns that take the split path), many short rows, a long flat input
 * one element off 16-byte alignment, and rows holding NaNs. Outputs are
 * poisoned before each run; two runs must be bitwise identical; ARGMAX/ARGMIN
 * indices and MAX/MIN values must equal the CPU's exactly, the rest within the
 * dtype's norm-wise tolerance. Split reductions (the last block of an output
 * merges its partials; arrival counters that the kernels leave at 0, never
 * memset) queued back to back with different split counts, and on two
 * contexts. Exits 77 ("skipped") without a GPU. */
#include "gpu_row_util.h"

static const char *op_name(cml_reduce_op op) {
    static const char *names[CML_REDUCE_OP_COUNT] = {"SUM", "MEAN", "MAX", "MIN", "VAR", "ARGMAX", "ARGMIN", "SUMSQ"};
    return names[op];
}

static bool is_arg(cml_reduce_op op) { return op == CML_REDUCE_ARGMAX || op == CML_REDUCE_ARGMIN; }

/* One reduction of (outer, n, inner), x starting x_off elements into its buffer; nan_every > 0
 * puts a NaN at every nan_every-th element. */
static void run_reduce(cml_reduce_op op, cml_dtype dt, int64_t outer, int64_t n, int64_t inner, int64_t x_off,
                       int correction, int64_t nan_every) {
    char what[160];
    snprintf(what, sizeof what, "%s %s (%lld, %lld, %lld) off=%lld corr=%d nan=%lld", op_name(op), cml_dtype_name(dt),
             (long long)outer, (long long)n, (long long)inner, (long long)x_off, correction, (long long)nan_every);
    const size_t es = cml_dtype_size(dt);
    const cml_dtype ydt = is_arg(op) ? CML_I64 : dt;
    const size_t yes = cml_dtype_size(ydt);
    const int64_t nx = outer * n * inner + x_off, ny = outer * inner;
    unsigned char *hx = malloc((size_t)nx * es), *want = malloc((size_t)ny * yes + 1), *got = malloc((size_t)ny * yes + 1);
    void *dx = dev_alloc((size_t)nx * es), *dy = dev_alloc((size_t)ny * yes);
    CHECK(hx && want && got && dx && dy);
    if (hx && want && got && dx && dy) {
        /* VAR on data away from zero, so that the mean matters */
        random_fill(hx, dt, nx, op == CML_REDUCE_VAR ? 1.0f : -2.0f, op == CML_REDUCE_VAR ? 4.0f : 2.0f);
        if (nan_every > 0)
            for (int64_t i = nan_every / 2; i < nx; i += nan_every) cml_dtype_store(hx, dt, i, NAN);
        upload(dx, hx, (size_t)nx * es);
        memset(want, 0xFF, (size_t)ny * yes);
        const unsigned char *cx = hx + x_off * (int64_t)es;
        CHECK_OK(cml_reduce(cctx, op, want, ydt, cx, dt, outer, n, inner, correction));
        const void *gx = (const char *)dx + x_off * (int64_t)es;
        GPU_TWICE(what, dy, (size_t)ny * yes, got, cml_reduce(gctx, op, dy, ydt, gx, dt, outer, n, inner, correction));
        if (is_arg(op)) {
            for (int64_t i = 0; i < ny; i++) {
                int64_t g = ((int64_t *)got)[i], w = ((int64_t *)want)[i];
                if (g != w) {
                    CHECK_MSG(false, "%s: output %lld is index %lld on the GPU, %lld on the CPU", what, (long long)i,
                              (long long)g, (long long)w);
                    break;
                }
            }
        } else {
            const bool exact = op == CML_REDUCE_MAX || op == CML_REDUCE_MIN;
            const bool nan_ok = nan_every > 0 || (op == CML_REDUCE_VAR && n <= correction); /* 0/0 */
            compare_tol(what, got, want, dt, ny, exact ? 0.0 : tol_for(dt), nan_ok);
        }
    }
    free(hx);
    free(want);
    free(got);
    dev_free(dx, (size_t)nx * es);
    dev_free(dy, (size_t)ny * yes);
}

static void test_rows(void) {
    for (int s = 0; s < N_ROW_SHAPES; s++)
        for (int d = 0; d < n_test_dtypes(); d++)
            for (int op = 0; op < CML_REDUCE_OP_COUNT; op++)
                run_reduce((cml_reduce_op)op, TEST_DTYPES[d], ROW_SHAPES[s][0], ROW_SHAPES[s][1], 1, 0, 1, 0);
}

static void test_columns(void) {
    static const int64_t shapes[][3] = {{1, 1, 5}, {2, 1000, 33}, {3, 17, 1025}, {1, 100000, 3}, {4, 64, 2},
                                        {5, 7, 127}, {2, 262144, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < n_test_dtypes(); d++)
            for (int op = 0; op < CML_REDUCE_OP_COUNT; op++)
                run_reduce((cml_reduce_op)op, TEST_DTYPES[d], shapes[s][0], shapes[s][1], shapes[s][2], 0, 1, 0);
}

/* Many short rows (warp-per-row groups), unaligned rows and flat inputs off 16-byte alignment
 * (scalar head and tail around the 16-byte body), and the split paths: a long flat row (many
 * interleaved chunks) and 150 rows of 16411 (two chunks a row, on 132 SMs). */
static void test_odd_layouts(void) {
    for (int d = 0; d < 2; d++) {
        cml_dtype dt = TEST_DTYPES[d];
        for (int op = 0; op < CML_REDUCE_OP_COUNT; op++) {
            run_reduce((cml_reduce_op)op, dt, 1000, 37, 1, 0, 1, 0);
            run_reduce((cml_reduce_op)op, dt, 9, 5003, 1, 1, 1, 0);
            run_reduce((cml_reduce_op)op, dt, 1, under_sanitizer() ? 300001 : 3000001, 1, 1, 1, 0);
            run_reduce((cml_reduce_op)op, dt, 150, 16411, 1, 1, 1, 0); /* 2 chunks a row: one range each */
        }
        run_reduce(CML_REDUCE_VAR, dt, 7, 127, 1, 0, 0, 0);
        run_reduce(CML_REDUCE_VAR, dt, 3, 1, 4, 0, 1, 0); /* n - correction = 0: NaN like the CPU */
    }
}

/* A NaN anywhere wins MAX/MIN, ARGMAX/ARGMIN give the first NaN, sums become NaN. */
static void test_nans(void) {
    for (int op = 0; op < CML_REDUCE_OP_COUNT; op++) {
        run_reduce((cml_reduce_op)op, CML_F32, 16, 1025, 1, 0, 1, 3001);
        run_reduce((cml_reduce_op)op, CML_BF16, 2, 300, 17, 0, 1, 977);
        run_reduce((cml_reduce_op)op, CML_F32, 2, 262144, 1, 0, 1, 70001);
    }
}

/* Split reductions of different shapes (different split counts on the same arrival counters)
 * queued back to back with no wait between them, on the default context and on a second one:
 * every result must equal the CPU's within tolerance and its own first run bitwise. A counter
 * not left at 0 by a launch would make a later launch merge too early or never. */
static void test_split_back_to_back(void) {
    enum { VIEWS = 4, CALLS = 24 };
    const int64_t N = under_sanitizer() ? 420000 : 4200000; /* divisible by 1, 3, 7, 20 */
    static const int64_t rows[VIEWS] = {1, 3, 7, 20};
    cml_ctx *other = NULL;
    CHECK_OK(cml_ctx_create(&other, gpu));
    float *hx = malloc(sizeof(float) * (size_t)N), want[VIEWS][20], got[CALLS][20];
    void *dx = dev_alloc(sizeof(float) * (size_t)N), *dy = dev_alloc(sizeof(float) * CALLS * 20);
    CHECK(hx && dx && dy && other);
    if (hx && dx && dy && other) {
        random_fill(hx, CML_F32, N, -1.0f, 1.0f);
        upload(dx, hx, sizeof(float) * (size_t)N);
        for (int v = 0; v < VIEWS; v++)
            CHECK_OK(cml_reduce(cctx, CML_REDUCE_SUM, want[v], CML_F32, hx, CML_F32, rows[v], N / rows[v], 1, 0));
        poison(dy, sizeof(float) * CALLS * 20);
        CHECK_OK(cml_ctx_synchronize(gctx)); /* the poison is in place before the other stream writes */
        for (int c = 0; c < CALLS; c++) {
            const int v = c % VIEWS;
            cml_ctx *ctx = c % 3 == 2 ? other : gctx; /* two streams, each with its own counters */
            CHECK_OK(cml_reduce(ctx, CML_REDUCE_SUM, (float *)dy + c * 20, CML_F32, dx, CML_F32, rows[v],
                                N / rows[v], 1, 0));
        }
        CHECK_OK(cml_ctx_synchronize(other));
        download(got, dy, sizeof got);
        for (int c = 0; c < CALLS; c++) {
            const int v = c % VIEWS;
            char what[96];
            snprintf(what, sizeof what, "SUM f32 (%lld, %lld) call %d", (long long)rows[v], (long long)(N / rows[v]), c);
            compare_tol(what, got[c], want[v], CML_F32, rows[v], 1e-5, false);
            CHECK_MSG(memcmp(got[c], got[v], sizeof(float) * (size_t)rows[v]) == 0, "%s: differs from call %d", what, v);
        }
    }
    free(hx);
    dev_free(dx, sizeof(float) * (size_t)N);
    dev_free(dy, sizeof(float) * CALLS * 20);
    cml_ctx_destroy(other);
}

static void test_unsupported(void) {
    void *p = dev_alloc(64);
    CHECK_STATUS(cml_reduce(gctx, CML_REDUCE_SUM, p, CML_F8E4M3, p, CML_F8E4M3, 1, 4, 1, 1), CML_ERR_UNSUPPORTED,
                 "cml_reduce: x_dtype=f8e4m3 is not supported on CUDA yet");
    dev_free(p, 64);
}

int main(void) {
    int rc = gpu_test_init(4321);
    if (rc) return rc;
    RUN(test_rows);
    RUN(test_columns);
    RUN(test_odd_layouts);
    RUN(test_nans);
    RUN(test_split_back_to_back);
    RUN(test_unsupported);
    return th_finish();
}
