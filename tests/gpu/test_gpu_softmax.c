/* GPU tests of softmax / log-softmax (forward and backward) and cross-entropy
 * (forward and backward) against the CPU reference on random inputs: rows x
 * cols in {1x1, 7x127, 3x1025, 127x4097, 2x262144} in f32, bf16 and f16, plus
 * the edges of the register paths (32768 and 65536 aligned, 32767 unaligned), rows one
 * element off 16-byte alignment, several L2 batches of long rows, columns
 * (inner > 1), ignored rows and bad targets. Outputs are poisoned before each
 * run, two runs must be bitwise identical, results within the dtype's
 * norm-wise tolerance. Exits 77 ("skipped") without a GPU. */
#include "gpu_row_util.h"

/* ---- softmax ------------------------------------------------------------------------------ */

static void run_softmax(cml_dtype dt, int64_t outer, int64_t n, int64_t inner, int64_t off, bool log) {
    char what[160];
    snprintf(what, sizeof what, "softmax%s %s (%lld, %lld, %lld) off=%lld", log ? " log" : "", cml_dtype_name(dt),
             (long long)outer, (long long)n, (long long)inner, (long long)off);
    const size_t es = cml_dtype_size(dt);
    const int64_t ne = outer * n * inner, nb = ne + off;
    const size_t bytes = (size_t)nb * es;
    unsigned char *hx = malloc(bytes), *hdy = malloc(bytes), *hy = malloc(bytes), *want = malloc(bytes),
                  *got = malloc(bytes);
    void *dx = dev_alloc(bytes), *ddy = dev_alloc(bytes), *dy = dev_alloc(bytes), *dout = dev_alloc(bytes);
    CHECK(hx && hdy && hy && want && got && dx && ddy && dy && dout);
    if (hx && hdy && hy && want && got && dx && ddy && dy && dout) {
        const int64_t o = off * (int64_t)es;
        random_fill(hx, dt, nb, -4.0f, 4.0f);
        random_fill(hdy, dt, nb, -1.0f, 1.0f);
        memset(hy, 0xFF, bytes);
        CHECK_OK(cml_softmax_fwd(cctx, hy + o, hx + o, outer, n, inner, dt, log));
        upload(dx, hx, bytes);
        GPU_TWICE(what, dout, bytes, got, cml_softmax_fwd(gctx, (char *)dout + o, (char *)dx + o, outer, n, inner, dt, log));
        compare_tol(what, got + o, hy + o, dt, ne, tol_for(dt), false);
        /* backward from the CPU's forward output */
        upload(dy, hy, bytes);
        upload(ddy, hdy, bytes);
        memset(want, 0xFF, bytes);
        CHECK_OK(cml_softmax_bwd(cctx, want + o, hdy + o, hy + o, outer, n, inner, dt, log));
        char bwhat[170];
        snprintf(bwhat, sizeof bwhat, "%s bwd", what);
        GPU_TWICE(bwhat, dout, bytes, got,
                  cml_softmax_bwd(gctx, (char *)dout + o, (char *)ddy + o, (char *)dy + o, outer, n, inner, dt, log));
        compare_tol(bwhat, got + o, want + o, dt, ne, tol_for(dt), false);
    }
    free(hx);
    free(hdy);
    free(hy);
    free(want);
    free(got);
    dev_free(dx, bytes);
    dev_free(ddy, bytes);
    dev_free(dy, bytes);
    dev_free(dout, bytes);
}

static void test_softmax_rows(void) {
    for (int s = 0; s < N_ROW_SHAPES; s++)
        for (int d = 0; d < n_test_dtypes(); d++)
            for (int log = 0; log < 2; log++)
                run_softmax(TEST_DTYPES[d], ROW_SHAPES[s][0], ROW_SHAPES[s][1], 1, 0, log);
}

/* The register path's limits, unaligned rows, and several L2 batches of long rows. */
static void test_softmax_edges(void) {
    for (int d = 0; d < 2; d++) {
        cml_dtype dt = TEST_DTYPES[d];
        for (int log = 0; log < 2; log++) {
            run_softmax(dt, 5, 32768, 1, 0, log); /* forward in registers, backward in chunks */
            run_softmax(dt, 3, 65536, 1, 0, log); /* bf16 forward in 8 words per thread, f32 in chunks */
            run_softmax(dt, 5, 32767, 1, 0, log); /* unaligned rows: forward in chunks */
            run_softmax(dt, 9, 16384, 1, 1, log); /* one element off alignment: scalar accesses */
            run_softmax(dt, 300, 64, 1, 0, log);  /* many rows per block */
            if (!under_sanitizer()) run_softmax(dt, 60, 262144, 1, 0, log); /* > 1 batch of rows */
        }
    }
}

static void test_softmax_columns(void) {
    static const int64_t shapes[][3] = {{2, 100, 33}, {3, 5, 1025}, {1, 1, 7}, {4, 4097, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < n_test_dtypes(); d++)
            for (int log = 0; log < 2; log++)
                run_softmax(TEST_DTYPES[d], shapes[s][0], shapes[s][1], shapes[s][2], 0, log);
}

/* ---- cross-entropy ---------------------------------------------------------------------------- */

#define IGNORE (-100)

/* Random targets, every 5th row ignored; bad_row >= 0 gets the target bad_value. */
static void run_ce(cml_dtype dt, int64_t rows, int64_t classes, int64_t bad_row, int64_t bad_value) {
    char what[160];
    snprintf(what, sizeof what, "cross_entropy %s (%lld, %lld) bad_row=%lld", cml_dtype_name(dt), (long long)rows,
             (long long)classes, (long long)bad_row);
    const size_t es = cml_dtype_size(dt), bytes = (size_t)(rows * classes) * es;
    unsigned char *hx = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
    int64_t *ht = malloc(sizeof(int64_t) * (size_t)rows);
    float *hdl = malloc(sizeof(float) * (size_t)rows), *lw = malloc(sizeof(float) * (size_t)rows),
          *lg = malloc(sizeof(float) * (size_t)rows);
    void *dx = dev_alloc(bytes), *dout = dev_alloc(bytes), *dt_ = dev_alloc(sizeof(int64_t) * (size_t)rows),
         *ddl = dev_alloc(sizeof(float) * (size_t)rows), *dl = dev_alloc(sizeof(float) * (size_t)rows);
    CHECK(hx && want && got && ht && hdl && lw && lg && dx && dout && dt_ && ddl && dl);
    if (hx && want && got && ht && hdl && lw && lg && dx && dout && dt_ && ddl && dl) {
        random_fill(hx, dt, rows * classes, -4.0f, 4.0f);
        for (int64_t r = 0; r < rows; r++) {
            ht[r] = r % 5 == 3 ? IGNORE : (int64_t)(cml_rng_u32(&rng) % (uint32_t)classes);
            hdl[r] = uniform(0.5f, 1.5f);
        }
        if (bad_row >= 0) ht[bad_row] = bad_value;
        upload(dx, hx, bytes);
        upload(dt_, ht, sizeof(int64_t) * (size_t)rows);
        upload(ddl, hdl, sizeof(float) * (size_t)rows);
        const size_t lbytes = sizeof(float) * (size_t)rows;
        if (bad_row < 0) {
            CHECK_OK(cml_cross_entropy_fwd(cctx, lw, hx, ht, rows, classes, dt, IGNORE));
            GPU_TWICE(what, dl, lbytes, lg, cml_cross_entropy_fwd(gctx, dl, dx, dt_, rows, classes, dt, IGNORE));
            compare_tol(what, lg, lw, CML_F32, rows, tol_for(dt), false);
            CHECK_OK(cml_cross_entropy_bwd(cctx, want, hdl, hx, ht, rows, classes, dt, IGNORE));
            GPU_TWICE(what, dout, bytes, got, cml_cross_entropy_bwd(gctx, dout, ddl, dx, dt_, rows, classes, dt, IGNORE));
            compare_tol(what, got, want, dt, rows * classes, tol_for(dt), false);
        } else {
            /* the CPU's message; the bad row's outputs are NaN, the others written */
            char msg[128];
            snprintf(msg, sizeof msg, "targets[%lld]=%lld must be in [0, %lld) or equal ignore_index=%d",
                     (long long)bad_row, (long long)bad_value, (long long)classes, IGNORE);
            CHECK_STATUS(cml_cross_entropy_fwd(cctx, lw, hx, ht, rows, classes, dt, IGNORE), CML_ERR_INVALID_ARG, msg);
            poison(dl, lbytes);
            CHECK_STATUS(cml_cross_entropy_fwd(gctx, dl, dx, dt_, rows, classes, dt, IGNORE), CML_ERR_INVALID_ARG, msg);
            CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_cross_entropy_fwd");
            download(lg, dl, lbytes);
            CHECK(isnan(lg[bad_row]));
            CHECK(rows < 2 || !isnan(lg[bad_row == 0 ? 1 : 0]));
            CHECK_STATUS(cml_cross_entropy_bwd(gctx, dout, ddl, dx, dt_, rows, classes, dt, IGNORE),
                         CML_ERR_INVALID_ARG, msg);
            CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_cross_entropy_bwd");
            download(got, dout, bytes);
            CHECK(isnan(cml_dtype_load(got, dt, bad_row * classes + classes - 1)));
        }
    }
    free(hx);
    free(want);
    free(got);
    free(ht);
    free(hdl);
    free(lw);
    free(lg);
    dev_free(dx, bytes);
    dev_free(dout, bytes);
    dev_free(dt_, sizeof(int64_t) * (size_t)rows);
    dev_free(ddl, sizeof(float) * (size_t)rows);
    dev_free(dl, sizeof(float) * (size_t)rows);
}

static void test_cross_entropy(void) {
    for (int s = 0; s < N_ROW_SHAPES; s++)
        for (int d = 0; d < n_test_dtypes(); d++) run_ce(TEST_DTYPES[d], ROW_SHAPES[s][0], ROW_SHAPES[s][1], -1, 0);
    for (int d = 0; d < 2; d++) {
        run_ce(TEST_DTYPES[d], 1000, 50, -1, 0);     /* many short rows */
        run_ce(TEST_DTYPES[d], 20, 100003, -1, 0);   /* long unaligned rows: split forward, chunked backward */
        run_ce(TEST_DTYPES[d], 9, 65536, -1, 0);     /* bf16 backward in 8 words per thread, f32 in chunks */
        run_ce(TEST_DTYPES[d], 600, 2048, -1, 0);    /* enough rows for the row-group forward */
    }
}

static void test_cross_entropy_bad_targets(void) {
    run_ce(CML_F32, 7, 127, 5, 127);        /* == classes */
    run_ce(CML_BF16, 7, 127, 2, -3);        /* negative, not ignore_index */
    run_ce(CML_F32, 3, 40000, 1, 1 << 20);  /* split forward, chunked backward */
    run_ce(CML_BF16, 600, 1024, 599, 5000); /* the last row */
}

int main(void) {
    int rc = gpu_test_init(98765);
    if (rc) return rc;
    RUN(test_softmax_rows);
    RUN(test_softmax_edges);
    RUN(test_softmax_columns);
    RUN(test_cross_entropy);
    RUN(test_cross_entropy_bad_targets);
    return th_finish();
}
