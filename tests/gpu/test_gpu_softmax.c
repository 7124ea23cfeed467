/* GPU tests of softmax / log-softmax (forward and backward) and cross-entropy
 * (forward and backward) against the CPU reference on random inputs: rows x
 * cols in {1x1, 7x127, 3x1025, 127x4097, 2x262144} in f32, bf16 and f16, plus
 * the edges of the register paths (32768 and 65536 aligned, 32767 unaligned), rows one
 * element off 16-byte alignment, several L2 batches of long rows, columns
 * (inner > 1), ignored rows and bad targets. Outputs are poisoned before each
 * run, two runs must be bitwise identical, results within the dtype's
 * norm-wise tolerance. Bad targets are reported at the next wait for the
 * stream (once; the first bad call's; at a synchronous copy too; past the
 * exact-record limit of cuda_index_check.h), or by the call itself on a
 * context created with CML_SYNC_CHECKS=1. Special values: rows with -inf
 * (masked columns; whole rows of -inf and rows with a NaN, which are NaN on
 * both sides) through every row path; cross-entropy rows of -inf logits only
 * and rows whose target's logit is -inf (loss +inf on both sides; dlogits of
 * a row of -inf: -dloss at the target, 0 elsewhere, exactly) through every
 * cross-entropy path. Exits 77 ("skipped") without a GPU. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "gpu_row_util.h"
#include "runtime/cuda_index_check.h"

static cml_ctx *sctx; /* a CUDA context created with CML_SYNC_CHECKS=1 */
static bool special;  /* put -inf (and NaN) into the inputs: see mask_rows */
static float ce_offset; /* added to every logit (run_ce): large logits, where the exps' arguments lose bits */
static bool ce_infs;  /* cross-entropy: rows of -inf and -inf targets, see inf_rows */

/* Row r of rows of n (inner == 1): r % 3 == 1 gets -inf in 3 of every 4 columns (not in
 * column keep[r] if keep); for softmax (no keep) r % 7 == 5 is all -inf and r % 11 == 9 gets
 * one NaN, rows that both sides make NaN. */
static void mask_rows(void *h, cml_dtype dt, int64_t rows, int64_t n, const int64_t *keep) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            const bool masked = (r % 3 == 1 && j % 4 != 0) || (!keep && r % 7 == 5);
            if (masked && !(keep && keep[r] == j)) cml_dtype_store(h, dt, r * n + j, -INFINITY);
            if (!keep && r % 11 == 9 && j == n / 2) cml_dtype_store(h, dt, r * n + j, NAN);
        }
}

/* Cross-entropy rows of rows x n with targets t: r % 4 == 2 all -inf (the target too), r % 4 == 0
 * the target's logit -inf (the others as they are). */
static void inf_rows(void *h, cml_dtype dt, int64_t rows, int64_t n, const int64_t *t) {
    for (int64_t r = 0; r < rows; r++) {
        if (r % 4 == 2)
            for (int64_t j = 0; j < n; j++) cml_dtype_store(h, dt, r * n + j, -INFINITY);
        if (r % 4 == 0 && t[r] >= 0 && t[r] < n) cml_dtype_store(h, dt, r * n + t[r], -INFINITY);
    }
}

/* After inf_rows: the loss of those rows is +inf on the GPU; a row of -inf has exactly the CPU's
 * dlogits (-dloss at the target, 0 elsewhere); a -inf target has exactly -dloss at the target. */
static void check_inf_rows(const char *what, const float *loss, const void *got, const void *want, cml_dtype dt,
                           int64_t rows, int64_t n, const int64_t *t, int64_t ignore) {
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (t[r] == ignore || (r % 4 != 0 && r % 4 != 2)) continue;
        if (loss[r] != INFINITY) bad++;
        const int64_t lo = r % 4 == 2 ? r * n : r * n + t[r], hi = r % 4 == 2 ? (r + 1) * n : lo + 1;
        for (int64_t i = lo; i < hi; i++) bad += cml_dtype_load(got, dt, i) != cml_dtype_load(want, dt, i);
        if (cml_dtype_load(got, dt, r * n + t[r]) >= 0) bad++; /* -dloss < 0 */
    }
    CHECK_MSG(bad == 0, "%s: %d wrong values in rows of -inf or at -inf targets", what, bad);
}

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
        if (special && inner == 1) mask_rows(hx + o, dt, outer, n, NULL);
        random_fill(hdy, dt, nb, -1.0f, 1.0f);
        memset(hy, 0xFF, bytes);
        CHECK_OK(cml_softmax_fwd(cctx, hy + o, hx + o, outer, n, inner, dt, log));
        upload(dx, hx, bytes);
        GPU_TWICE(what, dout, bytes, got, cml_softmax_fwd(gctx, (char *)dout + o, (char *)dx + o, outer, n, inner, dt, log));
        compare_tol(what, got + o, hy + o, dt, ne, tol_for(dt), special);
        /* backward from the CPU's forward output */
        upload(dy, hy, bytes);
        upload(ddy, hdy, bytes);
        memset(want, 0xFF, bytes);
        CHECK_OK(cml_softmax_bwd(cctx, want + o, hdy + o, hy + o, outer, n, inner, dt, log));
        char bwhat[170];
        snprintf(bwhat, sizeof bwhat, "%s bwd", what);
        GPU_TWICE(bwhat, dout, bytes, got,
                  cml_softmax_bwd(gctx, (char *)dout + o, (char *)ddy + o, (char *)dy + o, outer, n, inner, dt, log));
        compare_tol(bwhat, got + o, want + o, dt, ne, tol_for(dt), special);
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
            run_softmax(dt, 70, 1024, 1, 0, log); /* 4 words per thread, 8 or 4 rows per block */
            run_softmax(dt, 33, 4096, 1, 0, log); /* 4 words per thread, 2 rows or 1 per block */
            if (!under_sanitizer()) run_softmax(dt, 60, 262144, 1, 0, log); /* > 1 batch of rows */
        }
    }
}

/* -inf and NaN through the register rows (4 and 8 words, scalar), the one-pass chunks and the
 * two-pass chunks. */
static void test_softmax_special(void) {
    static const int64_t shapes[][3] = {{40, 1024, 0}, {23, 16384, 0}, {12, 65536, 0}, {9, 16384, 1},
                                        {4, 262144, 0}, {12, 32767, 0}};
    special = true;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < n_test_dtypes(); d++)
            for (int log = 0; log < 2; log++)
                run_softmax(TEST_DTYPES[d], shapes[s][0], shapes[s][1], 1, shapes[s][2], log);
    special = false;
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
          *lg = malloc(sizeof(float) * (size_t)rows), *lg2 = malloc(sizeof(float) * (size_t)rows);
    float *lse_w = malloc(2 * sizeof(float) * (size_t)rows), *lse_g = malloc(2 * sizeof(float) * (size_t)rows);
    void *dx = dev_alloc(bytes), *dout = dev_alloc(bytes), *dt_ = dev_alloc(sizeof(int64_t) * (size_t)rows),
         *ddl = dev_alloc(sizeof(float) * (size_t)rows), *dl = dev_alloc(sizeof(float) * (size_t)rows),
         *dlse = dev_alloc(2 * sizeof(float) * (size_t)rows);
    const bool ok = hx && want && got && ht && hdl && lw && lg && lg2 && lse_w && lse_g && dx && dout && dt_ && ddl &&
                    dl && dlse;
    CHECK(ok);
    if (ok) {
        random_fill(hx, dt, rows * classes, -4.0f, 4.0f);
        if (ce_offset != 0.0f)
            for (int64_t i = 0; i < rows * classes; i++)
                cml_dtype_store(hx, dt, i, cml_dtype_load(hx, dt, i) + ce_offset);
        for (int64_t r = 0; r < rows; r++) {
            ht[r] = r % 5 == 3 ? IGNORE : (int64_t)(cml_rng_u32(&rng) % (uint32_t)classes);
            hdl[r] = uniform(0.5f, 1.5f);
        }
        if (special) mask_rows(hx, dt, rows, classes, ht);
        if (ce_infs) inf_rows(hx, dt, rows, classes, ht);
        if (bad_row >= 0) ht[bad_row] = bad_value;
        upload(dx, hx, bytes);
        upload(dt_, ht, sizeof(int64_t) * (size_t)rows);
        upload(ddl, hdl, sizeof(float) * (size_t)rows);
        const size_t lbytes = sizeof(float) * (size_t)rows;
        if (bad_row < 0) {
            CHECK_OK(cml_cross_entropy_fwd(cctx, lw, NULL, hx, ht, rows, classes, dt, IGNORE));
            GPU_TWICE(what, dl, lbytes, lg, cml_cross_entropy_fwd(gctx, dl, NULL, dx, dt_, rows, classes, dt, IGNORE));
            compare_tol(what, lg, lw, CML_F32, rows, tol_for(dt), false);
            CHECK_OK(cml_cross_entropy_bwd(cctx, want, hdl, hx, NULL, ht, rows, classes, dt, IGNORE));
            GPU_TWICE(what, dout, bytes, got, cml_cross_entropy_bwd(gctx, dout, ddl, dx, NULL, dt_, rows, classes, dt,
                                                                    IGNORE));
            compare_tol(what, got, want, dt, rows * classes, tol_for(dt), false);
            if (ce_infs) check_inf_rows(what, lg, got, want, dt, rows, classes, ht, IGNORE);
            /* with the forward's logsumexp: the same losses bit for bit, the (max, log-sum) pairs against
             * the CPU's, and the one-pass backward from them against the CPU reference */
            const size_t sbytes = 2 * lbytes;
            poison(dlse, sbytes);
            GPU_TWICE(what, dl, lbytes, lg2, cml_cross_entropy_fwd(gctx, dl, dlse, dx, dt_, rows, classes, dt, IGNORE));
            CHECK_MSG(memcmp(lg2, lg, lbytes) == 0, "%s: the losses changed with lse asked for", what);
            download(lse_g, dlse, sbytes);
            CHECK_OK(cml_cross_entropy_fwd(cctx, lw, lse_w, hx, ht, rows, classes, dt, IGNORE));
            compare_tol(what, lse_g, lse_w, CML_F32, 2 * rows, tol_for(CML_F32), true);
            for (int64_t r = 0; r < rows; r++)
                CHECK_MSG(isnan(lse_g[2 * r]) == (ht[r] == IGNORE), "%s: lse row %lld", what, (long long)r);
            GPU_TWICE(what, dout, bytes, got, cml_cross_entropy_bwd(gctx, dout, ddl, dx, dlse, dt_, rows, classes, dt,
                                                                    IGNORE));
            compare_tol(what, got, want, dt, rows * classes, tol_for(dt), false);
            if (ce_infs) check_inf_rows(what, lg, got, want, dt, rows, classes, ht, IGNORE);
            CHECK_OK(cml_cross_entropy_bwd(cctx, got, hdl, hx, lse_w, ht, rows, classes, dt, IGNORE)); /* CPU, too */
            compare_tol(what, got, want, dt, rows * classes, tol_for(dt), false);
        } else {
            /* the CPU's message, from the call itself */
            char msg[128];
            snprintf(msg, sizeof msg, "targets[%lld]=%lld must be in [0, %lld) or equal ignore_index=%d",
                     (long long)bad_row, (long long)bad_value, (long long)classes, IGNORE);
            CHECK_STATUS(cml_cross_entropy_fwd(cctx, lw, NULL, hx, ht, rows, classes, dt, IGNORE), CML_ERR_INVALID_ARG,
                         msg);
            /* the reference for the other rows: the CPU with the bad row ignored; the GPU's bad row is NaN */
            const int64_t keep = ht[bad_row];
            ht[bad_row] = IGNORE;
            CHECK_OK(cml_cross_entropy_fwd(cctx, lw, NULL, hx, ht, rows, classes, dt, IGNORE));
            CHECK_OK(cml_cross_entropy_bwd(cctx, want, hdl, hx, NULL, ht, rows, classes, dt, IGNORE));
            ht[bad_row] = keep;
            lw[bad_row] = NAN;
            for (int64_t c = 0; c < classes; c++) cml_dtype_store(want, dt, bad_row * classes + c, NAN);
            /* CUDA: the call returns at once; the next wait for the stream reports the error, once */
            poison(dl, lbytes);
            CHECK_OK(cml_cross_entropy_fwd(gctx, dl, NULL, dx, dt_, rows, classes, dt, IGNORE));
            CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, msg);
            CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_cross_entropy_fwd: targets[");
            CHECK_ERROR(CML_ERR_INVALID_ARG, "(found on the GPU; reported by cml_ctx_synchronize)");
            CHECK_OK(cml_ctx_synchronize(gctx));
            download(lg, dl, lbytes);
            compare_tol(what, lg, lw, CML_F32, rows, tol_for(dt), true);
            CHECK(isnan(lg[bad_row]));
            poison(dout, bytes);
            CHECK_OK(cml_cross_entropy_bwd(gctx, dout, ddl, dx, NULL, dt_, rows, classes, dt, IGNORE));
            CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, msg);
            CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_cross_entropy_bwd: targets[");
            CHECK_OK(cml_ctx_synchronize(gctx));
            download(got, dout, bytes);
            compare_tol(what, got, want, dt, rows * classes, tol_for(dt), true);
            for (int64_t c = 0; c < classes; c++) CHECK(isnan(cml_dtype_load(got, dt, bad_row * classes + c)));
            /* the same through the forward's logsumexp: NaN pairs and a NaN row for the bad target */
            CHECK_OK(cml_cross_entropy_fwd(gctx, dl, dlse, dx, dt_, rows, classes, dt, IGNORE));
            CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, msg);
            download(lse_g, dlse, 2 * lbytes);
            CHECK(isnan(lse_g[2 * bad_row]) && isnan(lse_g[2 * bad_row + 1]));
            poison(dout, bytes);
            CHECK_OK(cml_cross_entropy_bwd(gctx, dout, ddl, dx, dlse, dt_, rows, classes, dt, IGNORE));
            CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, msg);
            CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_cross_entropy_bwd: targets[");
            download(got, dout, bytes);
            compare_tol(what, got, want, dt, rows * classes, tol_for(dt), true);
            for (int64_t c = 0; c < classes; c++) CHECK(isnan(cml_dtype_load(got, dt, bad_row * classes + c)));
            /* CML_SYNC_CHECKS=1: the calls themselves wait and return the error, as on the CPU */
            if (sctx) {
                CHECK_STATUS(cml_cross_entropy_fwd(sctx, dl, NULL, dx, dt_, rows, classes, dt, IGNORE),
                             CML_ERR_INVALID_ARG, msg);
                CHECK_MSG(strstr(cml_last_error(), "reported by") == NULL, "%s", cml_last_error());
                CHECK_STATUS(cml_cross_entropy_bwd(sctx, dout, ddl, dx, NULL, dt_, rows, classes, dt, IGNORE),
                             CML_ERR_INVALID_ARG, "cml_cross_entropy_bwd: targets[");
                CHECK_OK(cml_ctx_synchronize(sctx));
            }
        }
    }
    free(hx);
    free(want);
    free(got);
    free(ht);
    free(hdl);
    free(lw);
    free(lg);
    free(lg2);
    free(lse_w);
    free(lse_g);
    dev_free(dlse, 2 * sizeof(float) * (size_t)rows);
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
        if (!under_sanitizer()) run_ce(TEST_DTYPES[d], 600, 24576, -1, 0); /* 8 words per thread, both ways */
    }
    for (int d = 0; d < n_test_dtypes(); d++) {
        run_ce(TEST_DTYPES[d], 300, 64, -1, 0);  /* aligned short rows: many rows per block */
        run_ce(TEST_DTYPES[d], 40, 8192, -1, 0); /* one row per block, 4 words per thread */
        run_ce(TEST_DTYPES[d], 40, 12288, -1, 0); /* f32: 8 words per thread in the register forward */
    }
    /* -inf in 3 of 4 columns of every third row (never at the target) */
    special = true;
    for (int d = 0; d < n_test_dtypes(); d++) {
        run_ce(TEST_DTYPES[d], 300, 64, -1, 0);
        run_ce(TEST_DTYPES[d], 7, 127, -1, 0);
        run_ce(TEST_DTYPES[d], 40, 8192, -1, 0);
        run_ce(TEST_DTYPES[d], 3, 262144, -1, 0); /* split forward, one-pass backward */
    }
    special = false;
}

/* Rows of -inf logits and -inf targets through every path: loss +inf (not NaN), dlogits of a row
 * of -inf -dloss at the target and 0 elsewhere, as on the CPU. */
static void test_cross_entropy_infinities(void) {
    ce_infs = true;
    for (int d = 0; d < n_test_dtypes(); d++) {
        run_ce(TEST_DTYPES[d], 300, 64, -1, 0);   /* register rows, many per block */
        run_ce(TEST_DTYPES[d], 7, 127, -1, 0);    /* unaligned: streaming forward, scalar register backward */
        run_ce(TEST_DTYPES[d], 40, 8192, -1, 0);  /* register rows, 4 words per thread */
        run_ce(TEST_DTYPES[d], 5, 32768, -1, 0);  /* split forward; backward in 8 words per thread */
        run_ce(TEST_DTYPES[d], 3, 262144, -1, 0); /* split forward, one-pass backward */
        run_ce(TEST_DTYPES[d], 6, 100003, -1, 0); /* split forward, two-pass backward */
    }
    if (!under_sanitizer()) run_ce(CML_F32, 600, 24576, -1, 0); /* streaming forward in 16-byte words */
    ce_infs = false;
}

/* Logits around +-1e4 through every forward path: each exp's argument must keep its bits there
 * (the split forward once lost 3e-4 relative per exp to the rounding of max log2(e)). */
static void test_cross_entropy_large_logits(void) {
    const float offsets[2] = {1.0e4f, -3.0e4f};
    for (int o = 0; o < 2; o++) {
        ce_offset = offsets[o];
        for (int d = 0; d < 2; d++) {
            run_ce(TEST_DTYPES[d], 300, 64, -1, 0);   /* register rows, many per block */
            run_ce(TEST_DTYPES[d], 7, 127, -1, 0);    /* unaligned: streaming forward */
            run_ce(TEST_DTYPES[d], 40, 8192, -1, 0);  /* register rows, 4 words per thread */
            run_ce(TEST_DTYPES[d], 5, 32768, -1, 0);  /* aligned split forward */
            run_ce(TEST_DTYPES[d], 6, 100003, -1, 0); /* unaligned split forward */
        }
    }
    ce_offset = 0.0f;
}

/* NaN logits, with and without the forward's (max, log-sum) pairs: the loss and the whole dlogits row
 * NaN, as on the CPU. classes = 3 f32 rows are unaligned (the scalar online update, whose max a NaN
 * leaves at -inf: the pair's NaN log-sum must not read as a row of -inf); 64 is the register path. */
static void test_cross_entropy_nan_rows(void) {
    const int64_t shapes[2] = {3, 64};
    for (int s = 0; s < 2; s++)
        for (int d = 0; d < n_test_dtypes(); d++) {
            const cml_dtype dt = TEST_DTYPES[d];
            const int64_t R = 5, C = shapes[s];
            char what[96];
            snprintf(what, sizeof what, "cross_entropy NaN rows %s (%lld, %lld)", cml_dtype_name(dt), (long long)R,
                     (long long)C);
            const size_t es = cml_dtype_size(dt), bytes = (size_t)(R * C) * es;
            unsigned char *hx = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
            float hdl[5], lw[5], lg[5];
            const int64_t ht[5] = {0, 1, C - 1, IGNORE, 2 % C};
            void *dx = dev_alloc(bytes), *dout = dev_alloc(bytes), *dt_ = dev_alloc(sizeof ht),
                 *ddl = dev_alloc(sizeof hdl), *dl = dev_alloc(sizeof lw), *dlse = dev_alloc(2 * sizeof lw);
            CHECK(hx && want && got && dx && dout && dt_ && ddl && dl && dlse);
            if (hx && want && got && dx && dout && dt_ && ddl && dl && dlse) {
                random_fill(hx, dt, R * C, -4.0f, 4.0f);
                for (int64_t c = 0; c < C; c++) cml_dtype_store(hx, dt, 1 * C + c, NAN); /* all NaN */
                cml_dtype_store(hx, dt, 2 * C + C / 2, NAN);                             /* one NaN */
                cml_dtype_store(hx, dt, 3 * C, NAN);                                     /* ignored */
                for (int r = 0; r < R; r++) hdl[r] = uniform(0.5f, 1.5f);
                upload(dx, hx, bytes);
                upload(dt_, ht, sizeof ht);
                upload(ddl, hdl, sizeof hdl);
                CHECK_OK(cml_cross_entropy_fwd(cctx, lw, NULL, hx, ht, R, C, dt, IGNORE));
                CHECK_OK(cml_cross_entropy_bwd(cctx, want, hdl, hx, NULL, ht, R, C, dt, IGNORE));
                poison(dlse, 2 * sizeof lw);
                GPU_TWICE(what, dl, sizeof lw, lg, cml_cross_entropy_fwd(gctx, dl, dlse, dx, dt_, R, C, dt, IGNORE));
                compare_tol(what, lg, lw, CML_F32, R, tol_for(dt), true);
                CHECK(isnan(lg[1]) && isnan(lg[2]) && lg[3] == 0.0f);
                for (int with_lse = 0; with_lse < 2; with_lse++) {
                    const float *pairs = with_lse ? dlse : NULL;
                    GPU_TWICE(what, dout, bytes, got,
                              cml_cross_entropy_bwd(gctx, dout, ddl, dx, pairs, dt_, R, C, dt, IGNORE));
                    compare_tol(what, got, want, dt, R * C, tol_for(dt), true); /* NaN exactly where the CPU's */
                    for (int64_t c = 0; c < C; c++)
                        CHECK_MSG(isnan(cml_dtype_load(got, dt, C + c)) && isnan(cml_dtype_load(got, dt, 2 * C + c)),
                                  "%s (lse %d): column %lld of a NaN row is not NaN", what, with_lse, (long long)c);
                }
            }
            free(hx);
            free(want);
            free(got);
            dev_free(dx, bytes);
            dev_free(dout, bytes);
            dev_free(dt_, sizeof ht);
            dev_free(ddl, sizeof hdl);
            dev_free(dl, sizeof lw);
            dev_free(dlse, 2 * sizeof lw);
        }
}

static void test_cross_entropy_bad_targets(void) {
    run_ce(CML_F32, 7, 127, 5, 127);        /* == classes */
    run_ce(CML_BF16, 7, 127, 2, -3);        /* negative, not ignore_index */
    run_ce(CML_F32, 3, 40000, 1, 1 << 20);  /* split forward, chunked backward */
    run_ce(CML_BF16, 600, 1024, 599, 5000); /* the last row */
    run_ce(CML_F32, 300, 64, 17, 64);       /* many rows per block */
}

/* Several calls between two waits: the first bad call's error, once; good calls before and after
 * work; the report also comes from a synchronous copy; more calls than the exact records. */
static void test_cross_entropy_deferred(void) {
    enum { R = 7, N = 127, CALLS = CML__INDEX_CALLS + 44 };
    float hx[R * N], lw[R], lg[R];
    int64_t good[R], bad_a[R], bad_b[R];
    random_fill(hx, CML_F32, R * N, -4.0f, 4.0f);
    for (int r = 0; r < R; r++) good[r] = bad_a[r] = bad_b[r] = (int64_t)(cml_rng_u32(&rng) % N);
    bad_a[5] = N + 3;  /* the first bad call: its row 5 */
    bad_b[2] = -7;     /* a later one with a lower row: not reported */
    bad_b[6] = 999;
    float *dx = dev_alloc(sizeof hx), *dl = dev_alloc(sizeof lg), *ddl = dev_alloc(sizeof lg),
          *dout = dev_alloc(sizeof hx);
    int64_t *dg = dev_alloc(sizeof good), *da = dev_alloc(sizeof bad_a), *db = dev_alloc(sizeof bad_b);
    CHECK(dx && dl && ddl && dout && dg && da && db);
    if (!(dx && dl && ddl && dout && dg && da && db)) return;
    upload(dx, hx, sizeof hx);
    upload(dg, good, sizeof good);
    upload(da, bad_a, sizeof bad_a);
    upload(db, bad_b, sizeof bad_b);
    poison(ddl, sizeof lg);
    CHECK_OK(cml_cross_entropy_fwd(cctx, lw, NULL, hx, good, R, N, CML_F32, IGNORE));

    /* good, bad (fwd, row 5), bad (bwd, row 2), good: the fwd's row 5 is reported, once */
    CHECK_OK(cml_cross_entropy_fwd(gctx, dl, NULL, dx, dg, R, N, CML_F32, IGNORE));
    CHECK_OK(cml_cross_entropy_fwd(gctx, dl, NULL, dx, da, R, N, CML_F32, IGNORE));
    CHECK_OK(cml_cross_entropy_bwd(gctx, dout, ddl, dx, NULL, db, R, N, CML_F32, IGNORE));
    CHECK_OK(cml_cross_entropy_fwd(gctx, dl, NULL, dx, dg, R, N, CML_F32, IGNORE));
    CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG,
                 "cml_cross_entropy_fwd: targets[5]=130 must be in [0, 127) or equal ignore_index=-100 (found on "
                 "the GPU; reported by cml_ctx_synchronize)");
    CHECK_OK(cml_ctx_synchronize(gctx));
    /* a good call after the report: correct and no error */
    poison(dl, sizeof lg);
    CHECK_OK(cml_cross_entropy_fwd(gctx, dl, NULL, dx, dg, R, N, CML_F32, IGNORE));
    CHECK_OK(cml_ctx_synchronize(gctx));
    download(lg, dl, sizeof lg);
    compare_tol("cross_entropy after a reported error", lg, lw, CML_F32, R, 1e-5, false);

    /* a synchronous copy reports it too (after copying) */
    CHECK_OK(cml_cross_entropy_bwd(gctx, dout, ddl, dx, NULL, db, R, N, CML_F32, IGNORE));
    int64_t back[R];
    memset(back, 0, sizeof back);
    CHECK_STATUS(cml__cuda_memcpy(gctx, back, dg, sizeof back, true, "a copy"), CML_ERR_INVALID_ARG,
                 "cml_cross_entropy_bwd: targets[2]=-7 must be in [0, 127) or equal ignore_index=-100 (found on the "
                 "GPU; reported by a copy)");
    CHECK(memcmp(back, good, sizeof back) == 0);
    CHECK_OK(cml_ctx_synchronize(gctx));

    /* more calls than exact records: a bad one among the first is still exact ... */
    for (int c = 0; c < CALLS; c++)
        CHECK_OK(cml_cross_entropy_fwd(gctx, dl, NULL, dx, c == 3 || c == CALLS - 5 ? da : dg, R, N, CML_F32, IGNORE));
    CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, "cml_cross_entropy_fwd: targets[5]=130 must be");
    /* ... one among the later ones is found, and said to be ambiguous */
    for (int c = 0; c < CALLS; c++)
        CHECK_OK(cml_cross_entropy_fwd(gctx, dl, NULL, dx, c == CALLS - 5 ? db : dg, R, N, CML_F32, IGNORE));
    CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, "cml_cross_entropy_fwd: targets[2] must be in [0, 127)");
    CHECK_ERROR(CML_ERR_INVALID_ARG, "in one of the 44 index-checked calls queued after the first 256");
    /* exactly one call past the records: exact again */
    for (int c = 0; c <= CML__INDEX_CALLS; c++)
        CHECK_OK(cml_cross_entropy_fwd(gctx, dl, NULL, dx, c == CML__INDEX_CALLS ? db : dg, R, N, CML_F32, IGNORE));
    CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, "cml_cross_entropy_fwd: targets[2]=-7 must be");
    CHECK_OK(cml_ctx_synchronize(gctx));
    dev_free(dx, sizeof hx), dev_free(dl, sizeof lg), dev_free(ddl, sizeof lg), dev_free(dout, sizeof hx);
    dev_free(dg, sizeof good), dev_free(da, sizeof bad_a), dev_free(db, sizeof bad_b);
}

int main(void) {
    unsetenv("CML_SYNC_CHECKS"); /* the default context defers its reports: tested here */
    int rc = gpu_test_init(98765);
    if (rc) return rc;
    setenv("CML_SYNC_CHECKS", "1", 1);
    CHECK_OK(cml_ctx_create(&sctx, gpu));
    unsetenv("CML_SYNC_CHECKS");
    RUN(test_softmax_rows);
    RUN(test_softmax_edges);
    RUN(test_softmax_special);
    RUN(test_softmax_columns);
    RUN(test_cross_entropy);
    RUN(test_cross_entropy_large_logits);
    RUN(test_cross_entropy_infinities);
    RUN(test_cross_entropy_nan_rows);
    RUN(test_cross_entropy_bad_targets);
    RUN(test_cross_entropy_deferred);
    cml_ctx_destroy(sctx);
    return th_finish();
}
