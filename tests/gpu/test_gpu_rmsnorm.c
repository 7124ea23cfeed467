/* GPU tests of RMSNorm forward and backward (src/kernels/cuda/norm/rmsnorm_*.cu)
 * against the CPU reference on random inputs: rows x C over {1x1, 7x127,
 * 3x1025, 127x4097, 2x262144} and C = 1, 7, 1025, 32768 in f32, bf16 and f16,
 * with and without gamma; the edges of the register paths (backward 8192;
 * forward 4 or 8 words per thread, up to 32768 f32 / 65536 bf16; one more
 * element, or one element off alignment, takes the chunked or scalar paths);
 * several rows per row group of the aligned register rows (groups narrower
 * than a warp, 512-thread blocks, idle threads, one group per block);
 * several L2 batches of long unaligned rows; dx aliasing dy; rows == 0.
 * Outputs are poisoned before each run, two runs must be bitwise identical
 * (dgamma included: it is reduced in a fixed order), and results are within
 * the dtype's norm-wise tolerance. The forward's v2 kernels (CML_NORM_FWD_V2
 * modes 1 and 2) must also give bitwise the old kernels' y / rstd
 * (test_fwd_v2). Exits 77 ("skipped") without a GPU. */
#include "gpu_row_util.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h" /* cml__norm_bwd_*, cml__norm_fwd_v2_* */
#endif

typedef struct rms_case {
    cml_dtype dt;
    int64_t rows, C, off; /* off: x, y, dy, dx start that many elements into their buffers */
    bool gamma;
    bool alias; /* backward writes dx over dy */
} rms_case;

#ifdef CML_HAVE_CUDA
/* Set by test_deferred_rows: every backward runs once more with CML_NORM_BWD_DEFER off and must give
 * bitwise the same outputs. */
static bool defer_ab;
/* Set by test_fwd_v2 to the forward mode forced on (CML_NORM_FWD_V2 1 or 2): every forward runs once
 * more in mode 0 (the old kernels) and must give bitwise the same y and rstd. */
static int fwd_ab;
#endif

/* GPU dx vs CPU dx: the error relative to the norm of rstd * dy * gamma, the larger of the
 * two terms dx is the difference of (they cancel when C = 1). */
static void compare_dx(const char *what, const void *got, const void *want, const void *dy, const void *g,
                       const float *rstd, rms_case k) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < k.rows * k.C; i++) {
        const double a = cml_dtype_load(got, k.dt, i), b = cml_dtype_load(want, k.dt, i);
        if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) {
            CHECK_MSG(false, "%s: dx element %lld is %g on the GPU, %g on the CPU", what, (long long)i, a, b);
            return;
        }
        const double t = rstd[i / k.C] * cml_dtype_load(dy, k.dt, i) * (g ? cml_dtype_load(g, k.dt, i % k.C) : 1.0);
        num += (a - b) * (a - b);
        den += t * t;
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    CHECK_MSG(rel <= tol_for(k.dt), "%s: dx relative error %.3g > %.3g", what, rel, tol_for(k.dt));
}

static void run_rms(rms_case k) {
    char what[160];
    snprintf(what, sizeof what, "rmsnorm %s (%lld, %lld) off=%lld gamma=%d alias=%d", cml_dtype_name(k.dt),
             (long long)k.rows, (long long)k.C, (long long)k.off, k.gamma, k.alias);
    const size_t es = cml_dtype_size(k.dt);
    const int64_t ne = k.rows * k.C, nb = ne + k.off, o = k.off * (int64_t)es;
    const size_t bytes = (size_t)nb * es, cbytes = (size_t)k.C * es, rbytes = sizeof(float) * (size_t)(k.rows ? k.rows : 1);
    unsigned char *hx = malloc(bytes), *hdy = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes),
                  *again = malloc(bytes);
    unsigned char *hg = malloc(cbytes), *wg = malloc(cbytes), *gg = malloc(cbytes), *gg2 = malloc(cbytes);
    float *hr = malloc(rbytes), *gr = malloc(rbytes);
    void *dx = dev_alloc(bytes), *ddy = dev_alloc(bytes), *dout = dev_alloc(bytes), *dg = dev_alloc(cbytes),
         *dgo = dev_alloc(cbytes), *dr = dev_alloc(rbytes);
    bool ok = hx && hdy && want && got && again && hg && wg && gg && gg2 && hr && gr && dx && ddy && dout && dg &&
              dgo && dr;
    CHECK(ok);
    if (ok) {
        random_fill(hx, k.dt, nb, -1.5f, 2.0f);
        random_fill(hdy, k.dt, nb, -1.0f, 1.0f);
        random_fill(hg, k.dt, k.C, 0.5f, 1.5f);
        const void *cg = k.gamma ? hg : NULL, *ggam = k.gamma ? dg : NULL;
        upload(dx, hx, bytes);
        upload(dg, hg, cbytes);
        /* forward: y and rstd, poisoned, twice */
        memset(want, 0xFF, bytes);
        CHECK_OK(cml_rmsnorm_fwd(cctx, want + o, hr, hx + o, cg, k.rows, k.C, 1e-5f, k.dt));
        poison(dr, rbytes);
        GPU_TWICE(what, dout, bytes, got, cml_rmsnorm_fwd(gctx, (char *)dout + o, dr, (char *)dx + o, ggam, k.rows, k.C, 1e-5f, k.dt));
        compare_tol(what, got + o, want + o, k.dt, ne, tol_for(k.dt), false);
        download(gr, dr, rbytes);
        compare_tol(what, gr, hr, CML_F32, k.rows, 1e-5, false);
        /* and without rstd: the same y */
        poison(dout, bytes);
        CHECK_OK(cml_rmsnorm_fwd(gctx, (char *)dout + o, NULL, (char *)dx + o, ggam, k.rows, k.C, 1e-5f, k.dt));
        download(again, dout, bytes);
        CHECK_MSG(memcmp(again + o, got + o, (size_t)ne * es) == 0, "%s: y without rstd differs", what);
#ifdef CML_HAVE_CUDA
        if (fwd_ab) { /* the runs above took mode fwd_ab's kernels (test_fwd_v2); mode 0's bits */
            float *r0 = malloc(rbytes);
            CHECK(r0 != NULL);
            if (r0) {
                cml__norm_fwd_v2_force(0);
                poison(dout, bytes);
                poison(dr, rbytes);
                CHECK_OK(cml_rmsnorm_fwd(gctx, (char *)dout + o, dr, (char *)dx + o, ggam, k.rows, k.C, 1e-5f, k.dt));
                download(again, dout, bytes);
                download(r0, dr, rbytes);
                CHECK_MSG(memcmp(again + o, got + o, (size_t)ne * es) == 0, "%s: y differs from CML_NORM_FWD_V2=0's",
                          what);
                CHECK_MSG(memcmp(r0, gr, sizeof(float) * (size_t)k.rows) == 0, "%s: rstd differs from CML_NORM_FWD_V2=0's",
                          what);
                cml__norm_fwd_v2_force(fwd_ab);
            }
            free(r0);
        }
        if (fwd_ab) goto done; /* test_fwd_v2 checks the forward; the other groups run the backward */
#endif
        /* backward from the CPU's rstd */
        upload(dr, hr, rbytes);
        memset(want, 0xFF, bytes);
        CHECK_OK(cml_rmsnorm_bwd(cctx, want + o, wg, hdy + o, hx + o, cg, hr, k.rows, k.C, k.dt));
        char bwhat[180];
        snprintf(bwhat, sizeof bwhat, "%s bwd", what);
        void *dxo = k.alias ? ddy : dout;
        for (int rep = 0; rep < 2; rep++) { /* poisoned outputs, twice, bitwise identical */
            upload(ddy, hdy, bytes);
            if (!k.alias) poison(dout, bytes);
            poison(dgo, cbytes);
            CHECK_OK(cml_rmsnorm_bwd(gctx, (char *)dxo + o, dgo, (char *)ddy + o, (char *)dx + o, ggam, dr, k.rows,
                                     k.C, k.dt));
            download(rep == 0 ? got : again, dxo, bytes);
            download(rep == 0 ? gg : gg2, dgo, cbytes);
        }
        CHECK_MSG(memcmp(got + o, again + o, (size_t)ne * es) == 0, "%s: a repeat run's dx differs", bwhat);
        CHECK_MSG(memcmp(gg, gg2, cbytes) == 0, "%s: a repeat run's dgamma differs", bwhat);
#ifdef CML_HAVE_CUDA
        if (defer_ab) { /* the runs above deferred dx (test_deferred_rows); the other schedule's bits */
            cml__norm_bwd_defer_force(0);
            upload(ddy, hdy, bytes);
            if (!k.alias) poison(dout, bytes);
            poison(dgo, cbytes);
            CHECK_OK(cml_rmsnorm_bwd(gctx, (char *)dxo + o, dgo, (char *)ddy + o, (char *)dx + o, ggam, dr, k.rows,
                                     k.C, k.dt));
            download(again, dxo, bytes);
            download(gg2, dgo, cbytes);
            CHECK_MSG(memcmp(got + o, again + o, (size_t)ne * es) == 0, "%s: dx differs from CML_NORM_BWD_DEFER=0's",
                      bwhat);
            CHECK_MSG(memcmp(gg, gg2, cbytes) == 0, "%s: dgamma differs from CML_NORM_BWD_DEFER=0's", bwhat);
            cml__norm_bwd_defer_force(1);
        }
#endif
        compare_dx(bwhat, got + o, want + o, hdy + o, cg, hr, k);
        compare_tol(bwhat, gg, wg, k.dt, k.C, tol_for(k.dt), false);
        /* without dgamma: the same dx */
        upload(ddy, hdy, bytes);
        if (!k.alias) poison(dout, bytes);
        CHECK_OK(cml_rmsnorm_bwd(gctx, (char *)dxo + o, NULL, (char *)ddy + o, (char *)dx + o, ggam, dr, k.rows, k.C, k.dt));
        download(again, dxo, bytes);
        CHECK_MSG(memcmp(got + o, again + o, (size_t)ne * es) == 0, "%s: dx without dgamma differs", bwhat);
    }
#ifdef CML_HAVE_CUDA
done:
#endif
    free(hx), free(hdy), free(want), free(got), free(again), free(hg), free(wg), free(gg), free(gg2), free(hr), free(gr);
    dev_free(dx, bytes), dev_free(ddy, bytes), dev_free(dout, bytes), dev_free(dg, cbytes), dev_free(dgo, cbytes);
    dev_free(dr, rbytes);
}

static void test_shapes(void) {
    for (int s = 0; s < N_ROW_SHAPES; s++)
        for (int d = 0; d < n_test_dtypes(); d++)
            run_rms((rms_case){TEST_DTYPES[d], ROW_SHAPES[s][0], ROW_SHAPES[s][1], 0, true, false});
    static const int64_t cols[] = {1, 7, 1025, 32768};
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
        for (int d = 0; d < n_test_dtypes(); d++)
            run_rms((rms_case){TEST_DTYPES[d], cols[c] >= 32768 ? 5 : 37, cols[c], 0, true, false});
}

static void test_no_gamma(void) {
    for (int d = 0; d < 2; d++) {
        run_rms((rms_case){TEST_DTYPES[d], 7, 127, 0, false, false});
        run_rms((rms_case){TEST_DTYPES[d], 64, 1024, 0, false, false});
        run_rms((rms_case){TEST_DTYPES[d], 3, 20000, 0, false, false});
        run_rms((rms_case){TEST_DTYPES[d], 3, 20000, 1, false, false});
    }
}

static void test_edges(void) {
    static const int64_t shapes[][2] = {{33, 8192}, {5, 8193}, {9, 16384}, {5, 16385}, {300, 64},
                                        {17, 4096}, {3, 32768}, {3, 65536}, {1000, 3}, {3, 32769}};
    for (int d = 0; d < 2; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            run_rms((rms_case){TEST_DTYPES[d], shapes[s][0], shapes[s][1], 0, true, false});
        run_rms((rms_case){TEST_DTYPES[d], 9, 4096, 1, true, false});  /* one element off alignment */
        run_rms((rms_case){TEST_DTYPES[d], 5, 9000, 1, true, false});  /* unaligned, long: two passes */
        run_rms((rms_case){TEST_DTYPES[d], 64, 1024, 0, true, true});  /* dx over dy, registers */
        run_rms((rms_case){TEST_DTYPES[d], 3, 20000, 0, true, true});  /* dx over dy, one pass */
        run_rms((rms_case){TEST_DTYPES[d], 700, 20000, 0, true, true}); /* one pass, several rows per block group */
        run_rms((rms_case){TEST_DTYPES[d], 3, 20000, 1, true, true});  /* dx over dy, two passes */
        if (!under_sanitizer()) {
            run_rms((rms_case){TEST_DTYPES[d], 60, 262144, 0, true, false});
            run_rms((rms_case){TEST_DTYPES[d], 60, 262143, 1, true, false}); /* several L2 batches */
        }
    }
}

/* The aligned register rows (norm_bwd_rows.cuh) with several rows per row group: groups of 8
 * or 16 lanes sharing a warp with different row counts (20001 x 64), 64-thread groups in
 * 512-thread blocks (5000 x 256 f32), groups with idle threads (3000 x 1000: 125 words of 128),
 * one 1024-thread group per block (700 x 8192 bf16, 300 x 4096 f32), dx over dy. */
static void test_row_groups(void) {
    static const int64_t shapes[][2] = {{20001, 64}, {5000, 256}, {3000, 1000}, {300, 4096}, {700, 8192}};
    for (int d = 0; d < 2; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            run_rms((rms_case){TEST_DTYPES[d], shapes[s][0], shapes[s][1], 0, true, false});
        run_rms((rms_case){TEST_DTYPES[d], 3000, 1000, 0, false, true});
    }
}

/* Aligned rows of 3..16 half chunks, which run as thread-block clusters (norm_bwd_cluster.cuh): bf16/f16
 * C = 8200 .. 32768 make 3, 4, 5, 6, 7 and 8 chunks of 4096 columns; f32 the same C make 5, 6, 7,
 * 8, 9, 10, 12, 13, 14 and 16 chunks of 2048 (test_edges' 65536 columns: bf16 16 chunks of 4096;
 * f32 32, nbl_kernel's). Rows of 2 half chunks never take it (they are one full chunk of
 * nbl_kernel). 37 rows (prime) leave most clusters one row; 1031 x 8200 and 203 x 32768 walk
 * several rows per cluster (up to 6 in the bf16 1031 rows, ~10 in the f32 ones: both phases and the
 * parity wrap of the exchange's slot sets); without gamma, dx over dy. */
static void test_cluster_rows(void) {
    static const int64_t cols[] = {8200, 11272, 12296, 16384, 16392, 20480, 22536, 24584, 28672, 32768};
#ifdef CML_HAVE_CUDA
    cml__norm_bwd_staged_force(0); /* 16-bit rows of 2..16 chunks would take nbs_kernel first */
    const unsigned long long launches = cml__norm_bwd_cluster_launches();
#endif
    for (int d = 0; d < n_test_dtypes(); d++) {
        for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
            run_rms((rms_case){TEST_DTYPES[d], 37, cols[c], 0, true, false});
        run_rms((rms_case){TEST_DTYPES[d], 1031, 8200, 0, true, false});
        run_rms((rms_case){TEST_DTYPES[d], 203, 32768, 0, true, false});
        run_rms((rms_case){TEST_DTYPES[d], 37, 22536, 0, false, false});
        run_rms((rms_case){TEST_DTYPES[d], 37, 12296, 0, true, true});
    }
#ifdef CML_HAVE_CUDA
    /* the cluster kernel itself ran (not only its fallback); under a sanitizer the cluster
     * occupancy query may refuse, and the fallback is then the right path */
    if (!under_sanitizer())
        CHECK_MSG(cml__norm_bwd_cluster_launches() > launches, "the thread-block-cluster backward never ran");
    cml__norm_bwd_staged_force(-1);
#endif
}

/* Rows of 17 and 33 full chunks (C = 131080: the last chunk 8 columns; f32 takes full chunks past
 * 32 half chunks), whose chunks wait on each other in nbl_kernel, with the deferred dx schedule
 * forced on (CML_NORM_BWD_DEFER, norm_bwd_long.cuh): run_rms's CPU comparison and repeat, and dx and
 * dgamma bitwise equal to the other schedule's. 37 rows over 15 (bf16) / 8 (f32) groups: 2..6 rows
 * a group (the first row has no previous one, the last is written after the loop); one row; 151
 * rows (outside a sanitizer); without gamma, dx over dy. */
static void test_deferred_rows(void) {
#ifdef CML_HAVE_CUDA
    cml__norm_bwd_staged_force(0); /* 16-bit rows of 2..16 chunks would take nbs_kernel first */
    const unsigned long long launches = cml__norm_bwd_defer_launches();
    cml__norm_bwd_defer_force(1);
    cml__norm_bwd_longcluster_force(0); /* these rows are nbl_kernel's only with the one-cluster kernel off */
    defer_ab = true;
    for (int d = 0; d < n_test_dtypes(); d++) {
        run_rms((rms_case){TEST_DTYPES[d], 37, 131080, 0, true, false});
        run_rms((rms_case){TEST_DTYPES[d], 1, 131080, 0, true, false});
        run_rms((rms_case){TEST_DTYPES[d], 37, 131080, 0, false, false});
        run_rms((rms_case){TEST_DTYPES[d], 37, 131080, 0, true, true});
        if (!under_sanitizer()) run_rms((rms_case){TEST_DTYPES[d], 151, 131080, 0, true, false});
    }
    defer_ab = false;
    cml__norm_bwd_defer_force(-1);
    cml__norm_bwd_longcluster_force(-1);
    CHECK_MSG(cml__norm_bwd_defer_launches() > launches, "the deferred nbl_kernel never ran");
    cml__norm_bwd_staged_force(-1);
#endif
}

/* Rows of up to 16 x 16384 columns as ONE thread-block cluster a row (nbx_kernel, norm_bwd_cluster.cuh;
 * CML_NORM_BWD_LONGCLUSTER), forced wherever it fits (mode 2; its default range is LayerNorm of 16-bit
 * storage with C > 131072, checked too): C = 262144 (16
 * CTAs of 16384), 131096 (9 CTAs of 14568, the last 14552: balanced chunks), 1 / 3 / 257 rows (257 rows walk
 * ~32 rows per cluster: every slot set and mbarrier phase of the exchange several times); without
 * gamma, dx over dy; and with the kernel forced everywhere (mode 2) rows of nbc's range
 * (37 x 20000: clusters of 2; 5 x 40008). 262152 columns need 17 CTAs: the previous path, no nbx launch.
 * Each run: run_rms's poisoned outputs, CPU float64 comparison and bitwise repeat. Outside a sanitizer the
 * launch counter must move (under one the cluster occupancy query may refuse: then the fallback runs). */
static void test_longcluster_rows(void) {
#ifdef CML_HAVE_CUDA
    cml__norm_bwd_staged_force(0); /* 16-bit rows of 2..16 chunks would take nbs_kernel first */
    const bool san = under_sanitizer();
    const unsigned long long launches = cml__norm_bwd_longcluster_launches();
    cml__norm_bwd_longcluster_force(2);
    for (int d = 0; d < n_test_dtypes(); d++) {
        const cml_dtype dt = TEST_DTYPES[d];
        run_rms((rms_case){dt, 1, 262144, 0, true, false});
        run_rms((rms_case){dt, 3, 131096, 0, true, false});
        run_rms((rms_case){dt, 3, 131096, 0, false, true});
        if (san) continue;
        run_rms((rms_case){dt, 3, 262144, 0, true, false});
        run_rms((rms_case){dt, 3, 262144, 0, true, true});
        run_rms((rms_case){dt, 257, 131096, 0, true, false});
        printf("  %s x 131096: %d clusters at once\n", cml_dtype_name(dt), cml__norm_bwd_longcluster_last_groups());
        if (dt == CML_BF16) { /* 257 rows of 16-CTA clusters */
            run_rms((rms_case){dt, 257, 262144, 0, true, true});
            printf("  %s x 262144: %d clusters at once\n", cml_dtype_name(dt),
                   cml__norm_bwd_longcluster_last_groups());
        }
        const unsigned long long n = cml__norm_bwd_longcluster_launches();
        run_rms((rms_case){dt, 3, 262152, 0, true, false}); /* 17 CTAs: not this kernel */
        CHECK_MSG(cml__norm_bwd_longcluster_launches() == n, "%s: 262152 columns took the one-cluster kernel",
                  cml_dtype_name(dt));
    }
    cml__norm_bwd_longcluster_force(1); /* the default range: not RMSNorm */
    for (int d = 0; d < n_test_dtypes() && !san; d++) {
        const cml_dtype dt = TEST_DTYPES[d];
        const unsigned long long n = cml__norm_bwd_longcluster_launches();
        run_rms((rms_case){dt, 1, 262144, 0, true, false});
        CHECK_MSG(cml__norm_bwd_longcluster_launches() == n,
                  "%s x 262144: RMSNorm is outside the one-cluster kernel's default range", cml_dtype_name(dt));
    }
    cml__norm_bwd_longcluster_force(2);
    for (int d = 0; d < n_test_dtypes(); d++) {
        run_rms((rms_case){TEST_DTYPES[d], 37, 20000, 0, true, false});
        if (!san) run_rms((rms_case){TEST_DTYPES[d], 5, 40008, 0, true, false});
    }
    cml__norm_bwd_longcluster_force(-1);
    if (!san) CHECK_MSG(cml__norm_bwd_longcluster_launches() > launches, "the one-cluster-a-row backward never ran");
    cml__norm_bwd_staged_force(-1);
#endif
}

#ifdef CML_HAVE_CUDA
/* run_rms, and which form of the staged kernel ran: the row-sync form (form 2), only the cluster form (1) or neither
 * (0; the launch counters are host-side: under a sanitizer too). */
static void run_staged(rms_case k, int form) {
    const unsigned long long a = cml__norm_bwd_staged_launches(), b = cml__norm_bwd_staged_rows_launches();
    run_rms(k);
    check_staged_form("rmsnorm", k.dt, k.rows, k.C, form, cml__norm_bwd_staged_launches() > a,
                      cml__norm_bwd_staged_rows_launches() > b);
}
#endif

/* Rows staged in shared memory by bulk copies (nbs_kernel, norm_bwd_staged.cuh; CML_NORM_BWD_STAGED), forced
 * in-process in modes 1..3 and by default (2) over the same shapes: 1 x 32768, 3 x 32776 (uneven chunks), 37 x 20000,
 * 300 x 32768 (several rows a group: the ring wraps; groups of unequal row counts), 5 x 262144, 257 x 131096 (tens of
 * rows a group: every stage, slot and mbarrier phase many times), 3 x 262152 (17 chunks of 16384: beyond the cluster
 * form); without gamma(/beta), gamma only, dx over dy. The cluster form: 2..16 CTAs a row, clusters as many as fit;
 * the row-sync form: 2..64 CTAs a row (f32 5 x 262144: 64, two slots a lane of the merge), rings of 4..8 stages of 1..3
 * words a thread (idle threads), dx two rows behind pass 1. Not this kernel: one chunk (16384 16-bit / 8192 f32), the
 * switch off. Each run: the poisoned outputs, the float64 comparison and the bitwise repeat; the launch counters must
 * move exactly where a form is meant to run (staged_form). */
static void test_staged_rows(void) {
#ifdef CML_HAVE_CUDA
    const bool san = under_sanitizer();
    for (int d = 0; d < n_test_dtypes(); d++) {
        const cml_dtype dt = TEST_DTYPES[d];
        for (int mode = 0; mode <= 4; mode++) {
            const int m = mode == 4 ? 2 : mode; /* 4: the default (CML_NORM_BWD_STAGED unset) */
            cml__norm_bwd_staged_force(mode == 4 ? -1 : mode);
            run_staged((rms_case){dt, 1, 32768, 0, true, false}, staged_form(dt, 32768, m));
            if (mode == 0 || mode == 4) continue;
            run_staged((rms_case){dt, 3, 32776, 0, true, true}, staged_form(dt, 32776, m));
            run_staged((rms_case){dt, 37, 20000, 0, false, true}, staged_form(dt, 20000, m));
            if (!san) {
                run_staged((rms_case){dt, 300, 32768, 0, true, false}, staged_form(dt, 32768, m));
                run_staged((rms_case){dt, 5, 262144, 0, true, true}, staged_form(dt, 262144, m));
                run_staged((rms_case){dt, 257, 131096, 0, true, false}, staged_form(dt, 131096, m));
                run_staged((rms_case){dt, 3, 262152, 0, true, false}, staged_form(dt, 262152, m));
            }
            run_staged((rms_case){dt, 9, dt == CML_F32 ? 8192 : 16384, 0, true, false}, 0); /* one chunk */
        }
    }
    cml__norm_bwd_staged_force(-1);
#endif
}

/* The forward's kernels of modes 1 and 2 (CML_NORM_FWD_V2, norm_fwd_v2.cuh: the hardware pack; mode 2
 * also 5 blocks per SM for register rows of 4 words in blocks of <= 256 threads), forced on in-process:
 * run_rms's CPU comparison and repeat, and y / rstd bitwise equal to mode 0's (the old kernels).
 * Register rows of 4 words in blocks of <= 256 threads (mode 2's kernel): 20001 and 301 x 64 (groups
 * of 2 lanes), 3000 x 1000 (idle threads), 33 x 4096, 17 x 8192; of 4 words in 512-thread blocks
 * (mode 1's kernel under mode 2): 9 x 16384; of 8 words: 5 x 16392, 3 x 32768, 3 x 65536; one-pass
 * chunks: 37 x 131080 (the last chunk 8 columns), 2 x 262144, 1 x 65544; without gamma; and the
 * paths with no v2 (f32; odd C; one element off alignment; 1 x 1), which must not count a v2
 * launch. Bigger shapes stay out of the sanitizer runs. */
static void test_fwd_v2(void) {
#ifdef CML_HAVE_CUDA
    static const int64_t shapes[][2] = {{20001, 64}, {301, 64}, {3000, 1000}, {33, 4096}, {17, 8192}, {9, 16384},
                                        {5, 16392}, {3, 32768}, {3, 65536}, {37, 131080}, {2, 262144},
                                        {1, 65544}};
    const bool san = under_sanitizer();
    for (int mode = 1; mode <= 2; mode++) {
        const unsigned long long l1 = cml__norm_fwd_v2_launches(1), l2 = cml__norm_fwd_v2_launches(2);
        cml__norm_fwd_v2_force(mode);
        fwd_ab = mode;
        for (int d = 0; d < n_test_dtypes(); d++) {
            const cml_dtype dt = TEST_DTYPES[d];
            if (san && dt == CML_F32) continue; /* f32 has no v2 kernel: outside the sanitizer only */
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                if (san && shapes[s][0] * shapes[s][1] > 300000) continue;
                run_rms((rms_case){dt, shapes[s][0], shapes[s][1], 0, true, false});
            }
            run_rms((rms_case){dt, 33, 4096, 0, false, false});
            run_rms((rms_case){dt, 3, 32768, 0, false, false});
            run_rms((rms_case){dt, 5, 131080, 0, false, false});
            if (dt == CML_F32) continue;
            /* the paths without a v2 kernel: no v2 launch counted */
            const unsigned long long n1 = cml__norm_fwd_v2_launches(1), n2 = cml__norm_fwd_v2_launches(2);
            run_rms((rms_case){dt, 7, 127, 0, true, false});
            run_rms((rms_case){dt, 9, 4096, 1, true, false});
            run_rms((rms_case){dt, 1, 1, 0, true, false});
            CHECK_MSG(cml__norm_fwd_v2_launches(1) == n1 && cml__norm_fwd_v2_launches(2) == n2,
                      "%s: an odd or unaligned row counted a v2 forward launch", cml_dtype_name(dt));
        }
        fwd_ab = 0;
        cml__norm_fwd_v2_force(-1);
        CHECK_MSG(cml__norm_fwd_v2_launches(1) > l1, "mode %d: the mode-1 forward kernels never ran", mode);
        if (mode == 2) CHECK_MSG(cml__norm_fwd_v2_launches(2) > l2, "mode 2: the mode-2 forward kernels never ran");
        else CHECK_MSG(cml__norm_fwd_v2_launches(2) == l2, "mode 1: a mode-2 forward kernel ran");
    }
#endif
}

/* rows == 0: dgamma is a sum over no rows, so it is overwritten with zeros. */
static void test_no_rows(void) {
    void *dg = dev_alloc(64), *p = dev_alloc(64);
    poison(dg, 64);
    CHECK_OK(cml_rmsnorm_bwd(gctx, p, dg, p, p, p, (const float *)p, 0, 16, CML_F32));
    CHECK_OK(cml_rmsnorm_fwd(gctx, p, (float *)p, p, p, 0, 16, 1e-5f, CML_F32));
    float hg[16];
    download(hg, dg, 64);
    for (int i = 0; i < 16; i++) CHECK(hg[i] == 0.0f);
    dev_free(dg, 64), dev_free(p, 64);
}

/* fp8 storage has no CUDA RMSNorm: a clear error, not a wrong result. */
static void test_unsupported_dtype(void) {
    void *p = dev_alloc(64);
    CHECK_STATUS(cml_rmsnorm_fwd(gctx, p, NULL, p, NULL, 2, 8, 1e-5f, CML_F8E4M3), CML_ERR_UNSUPPORTED,
                 "cml_rmsnorm_fwd: dtype=f8e4m3 is not supported on CUDA");
    dev_free(p, 64);
}

/* Rows of 257..1024 words in the wide-row kernel (nbw_kernel, norm_bwd_wide.cuh; CML_NORM_BWD_WIDE), forced
 * in-process in its two forms: mode 2 (4 x 256-thread groups of 2 words a thread up to 512 words, 2 x 256 of
 * 4 words beyond) and mode 3 (4 words a thread always: groups of 128 up to 512 words). 16-bit C = 4096 (512
 * words), 8192 (1024), 4104 (513: one word of the second half) and 2056 (257); f32 4096, 2048 and 1028; 1, 7
 * and (outside a sanitizer) 257 and 1601 rows (several rows a group: the staged next row, both scratch
 * parities); then with at most 2 blocks (cml__norm_bwd_wide_cap_blocks), so that 37 rows walk 4..10 rows a
 * group also under a sanitizer; without gamma, with gamma, dx over dy. Each run: run_rms's poisoned
 * outputs, CPU float64 comparison and bitwise repeat. Then the default range (mode 1): 16-bit rows of at
 * most 512 words only. Outside a sanitizer the launch counter must move. */
static void test_wide_rows(void) {
#ifdef CML_HAVE_CUDA
    static const int64_t cols16[] = {4096, 8192, 4104, 2056}, cols32[] = {4096, 2048, 1028};
    const bool san = under_sanitizer();
    const unsigned long long launches = cml__norm_bwd_wide_launches();
    for (int mode = 2; mode <= 3; mode++) {
        cml__norm_bwd_wide_force(mode);
        for (int d = 0; d < n_test_dtypes(); d++) {
            const cml_dtype dt = TEST_DTYPES[d];
            const int64_t *cols = dt == CML_F32 ? cols32 : cols16;
            const int nc = dt == CML_F32 ? 3 : 4;
            for (int c = 0; c < nc; c++) run_rms((rms_case){dt, 7, cols[c], 0, true, false});
            run_rms((rms_case){dt, 1, cols[0], 0, true, false});
            run_rms((rms_case){dt, 7, cols[1], 0, false, true});
            if (!san) {
                run_rms((rms_case){dt, 257, cols[0], 0, true, false});
                run_rms((rms_case){dt, 1601, cols[0], 0, true, false});
                run_rms((rms_case){dt, 257, cols[1], 0, true, true});
            }
            cml__norm_bwd_wide_cap_blocks(2);
            run_rms((rms_case){dt, 37, cols[0], 0, true, false});
            run_rms((rms_case){dt, 37, cols[1], 0, false, false});
            run_rms((rms_case){dt, 37, cols[2], 0, true, true});
            cml__norm_bwd_wide_cap_blocks(0);
            /* past 1024 words: not this kernel */
            const unsigned long long n = cml__norm_bwd_wide_launches();
            run_rms((rms_case){dt, 3, dt == CML_F32 ? 4100 : 8200, 0, true, false});
            CHECK_MSG(cml__norm_bwd_wide_launches() == n, "%s: a row of 1025 words took the wide-row kernel",
                      cml_dtype_name(dt));
        }
    }
    cml__norm_bwd_wide_force(1); /* the default range: 16-bit rows of 257..512 words */
    for (int d = 0; d < n_test_dtypes(); d++) {
        const cml_dtype dt = TEST_DTYPES[d];
        unsigned long long n = cml__norm_bwd_wide_launches();
        run_rms((rms_case){dt, 7, 4096, 0, true, false});
        CHECK_MSG((cml__norm_bwd_wide_launches() > n) == (dt != CML_F32),
                  "%s x 4096: the default range is 16-bit rows (wide-row kernel taken: %s)", cml_dtype_name(dt),
                  dt != CML_F32 ? "no" : "yes");
        n = cml__norm_bwd_wide_launches();
        run_rms((rms_case){dt, 7, 8192, 0, true, false});
        CHECK_MSG(cml__norm_bwd_wide_launches() == n, "%s x 8192: outside the default range", cml_dtype_name(dt));
    }
    cml__norm_bwd_wide_force(-1);
    if (!san) CHECK_MSG(cml__norm_bwd_wide_launches() > launches, "the wide-row backward never ran");
#endif
}

/* The partial-row sum (norm_bwd_partial.cuh) in each of its forms, through the register rows' one partial row a
 * block (bf16 8 rows a block, f32 4): at most 8 partial rows (40 x 1024: 4 columns a thread), 8 row phases (100 x
 * 1024, 300 x 1024, bf16 600 x 1024: up to 127 partial rows) and 32 (128 and more: 1500 x 1024, f32 600 x 1024), and
 * C not a multiple of 32 (600 x 1000); each with run_rms's CPU comparison and bitwise repeat. */
static void test_partial_phases(void) {
    static const int64_t shapes[][2] = {{40, 1024},  {100, 1024},  {300, 1024},
                                        {600, 1024}, {1500, 1024}, {600, 1000}};
    for (int d = 0; d < n_test_dtypes(); d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            run_rms((rms_case){TEST_DTYPES[d], shapes[s][0], shapes[s][1], 0, true, false});
}

int main(void) {
    int rc = gpu_test_init(97531);
    if (rc) return rc;
    RUN(test_shapes);
    RUN(test_no_gamma);
    RUN(test_edges);
    RUN(test_row_groups);
    RUN(test_cluster_rows);
    RUN(test_deferred_rows);
    RUN(test_longcluster_rows);
    RUN(test_staged_rows);
    RUN(test_wide_rows);
    RUN(test_partial_phases);
    RUN(test_fwd_v2);
    RUN(test_no_rows);
    RUN(test_unsupported_dtype);
    return th_finish();
}
