/* GPU tests of the embedding backward, cml_index_select_bwd (dx += the dy rows
 * gathered by idx, summed per destination row in increasing j): against the
 * CPU path, bit for bit in f32 (the same order of additions) and within 1e-2
 * in bf16/f16, on random and skewed indices (long runs of one index, every
 * index the same, n_src = 1), GPT-2's table (50257 x 768, 8192 tokens), several
 * outer slices; the output starts from random values (it accumulates) and two
 * runs from the same start must be bitwise identical; a bad index is reported
 * with the CPU's message at the next wait for the stream (the good indices'
 * rows are added; two bad calls report the first), or by the call itself on a
 * context created with CML_SYNC_CHECKS=1. Then the time of the GPT-2-sized
 * call (informational).
 * Exits 77 ("skipped") without a GPU. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, setenv */
#include <time.h>

#include "gpu_row_util.h"

enum { IDX_UNIFORM, IDX_SKEWED, IDX_SAME };

static void make_indices(int64_t *idx, int64_t n_idx, int64_t n_src, int kind) {
    for (int64_t j = 0; j < n_idx; j++) {
        float u = uniform(0.0f, 1.0f);
        int64_t v = kind == IDX_SAME ? n_src / 2 : kind == IDX_SKEWED ? (int64_t)((float)n_src * u * u * u * u)
                                                                      : (int64_t)((float)n_src * u);
        idx[j] = v < n_src ? v : n_src - 1;
    }
}

static void run_bwd(cml_dtype dt, int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner, int kind) {
    char what[160];
    snprintf(what, sizeof what, "index_select_bwd %s (%lld, %lld <- %lld, %lld) indices %d", cml_dtype_name(dt),
             (long long)outer, (long long)n_src, (long long)n_idx, (long long)inner, kind);
    const size_t es = cml_dtype_size(dt), nx = (size_t)(outer * n_src * inner) * es,
                 ny = (size_t)(outer * n_idx * inner) * es, ni = (size_t)n_idx * sizeof(int64_t);
    int64_t *idx = malloc(ni);
    void *dx0 = malloc(nx), *dy = malloc(ny), *want = malloc(nx), *got = malloc(nx), *again = malloc(nx);
    void *gidx = dev_alloc(ni), *gdx = dev_alloc(nx), *gdy = dev_alloc(ny);
    CHECK(idx && dx0 && dy && want && got && again && gidx && gdx && gdy);
    if (idx && dx0 && dy && want && got && again && gidx && gdx && gdy) {
        make_indices(idx, n_idx, n_src, kind);
        random_fill(dx0, dt, outer * n_src * inner, -1.0f, 1.0f);
        random_fill(dy, dt, outer * n_idx * inner, -1.0f, 1.0f);
        memcpy(want, dx0, nx);
        CHECK_OK(cml_index_select_bwd(cctx, want, dy, idx, outer, n_src, n_idx, inner, dt));
        upload(gidx, idx, ni);
        upload(gdy, dy, ny);
        for (int run = 0; run < 2; run++) {
            upload(gdx, dx0, nx);
            CHECK_OK(cml_index_select_bwd(gctx, gdx, gdy, gidx, outer, n_src, n_idx, inner, dt));
            download(run ? again : got, gdx, nx);
        }
        CHECK_MSG(memcmp(got, again, nx) == 0, "%s: a repeat run differs", what);
        if (dt == CML_F32) CHECK_MSG(memcmp(got, want, nx) == 0, "%s: differs from the CPU", what);
        else compare_tol(what, got, want, dt, outer * n_src * inner, tol_for(dt), false);
    }
    free(idx), free(dx0), free(dy), free(want), free(got), free(again);
    dev_free(gidx, ni), dev_free(gdx, nx), dev_free(gdy, ny);
}

static void test_shapes(void) {
    for (int di = 0; di < n_test_dtypes(); di++) {
        cml_dtype dt = TEST_DTYPES[di];
        run_bwd(dt, 1, 65, 1024, 128, IDX_UNIFORM); /* char-level GPT: B*T = 16*64 tokens */
        run_bwd(dt, 1, 64, 1024, 128, IDX_SKEWED);
        run_bwd(dt, 3, 11, 17, 33, IDX_UNIFORM);    /* several outer slices, odd sizes */
        run_bwd(dt, 2, 7, 300, 5, IDX_SKEWED);
        run_bwd(dt, 1, 1, 77, 65, IDX_UNIFORM);     /* n_src = 1: one run of everything */
        run_bwd(dt, 1, 100, 5000, 64, IDX_SAME);    /* one long run */
        run_bwd(dt, 1, 70000, 3, 1, IDX_UNIFORM);   /* 17-bit keys: five radix passes */
        if (!under_sanitizer()) {
            run_bwd(dt, 1, 50257, 8192, 768, IDX_SKEWED); /* GPT-2's wte, B*T = 8 x 1024 */
            run_bwd(dt, 1, 1000, 300000, 3, IDX_UNIFORM); /* long per-thread sort chunks */
        }
    }
}

static void test_bad_index(void) {
    enum { N_SRC = 10, N_IDX = 40, INNER = 8 };
    int64_t idx[N_IDX], idx2[N_IDX];
    for (int j = 0; j < N_IDX; j++) idx[j] = idx2[j] = (j * 7) % N_SRC;
    idx[23] = N_SRC; /* the first bad one */
    idx[31] = -1;
    idx2[4] = 11; /* a later call's bad index, at a lower position: not reported first */
    float dx0[N_SRC * INNER], dy[N_IDX * INNER], want[N_SRC * INNER], got[N_SRC * INNER];
    random_fill(dx0, CML_F32, N_SRC * INNER, -1.0f, 1.0f);
    random_fill(dy, CML_F32, N_IDX * INNER, -1.0f, 1.0f);
    /* the reference: the CPU over the good positions only (the GPU skips the bad ones) */
    memcpy(want, dx0, sizeof want);
    for (int j = 0; j < N_IDX; j++)
        if (idx[j] >= 0 && idx[j] < N_SRC)
            CHECK_OK(cml_index_select_bwd(cctx, want, dy + j * INNER, idx + j, 1, N_SRC, 1, INNER, CML_F32));
    float *gdx = dev_alloc(sizeof dx0), *gdy = dev_alloc(sizeof dy);
    int64_t *gidx = dev_alloc(sizeof idx), *gidx2 = dev_alloc(sizeof idx2);
    CHECK(gdx && gdy && gidx && gidx2);
    if (!(gdx && gdy && gidx && gidx2)) return;
    upload(gidx, idx, sizeof idx);
    upload(gidx2, idx2, sizeof idx2);
    upload(gdy, dy, sizeof dy);
    upload(gdx, dx0, sizeof dx0);
    float scratch[N_SRC * INNER];
    CHECK_STATUS(cml_index_select_bwd(cctx, scratch, dy, idx, 1, N_SRC, N_IDX, INNER, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_index_select_bwd: idx[23]=10 must be in [0, n_src=10)");
    /* CUDA: the call returns at once, the next wait reports it (once) */
    CHECK_OK(cml_index_select_bwd(gctx, gdx, gdy, gidx, 1, N_SRC, N_IDX, INNER, CML_F32));
    CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG,
                 "cml_index_select_bwd: idx[23]=10 must be in [0, n_src=10) (found on the GPU; reported by "
                 "cml_ctx_synchronize)");
    CHECK_OK(cml_ctx_synchronize(gctx));
    download(got, gdx, sizeof got);
    CHECK_MSG(memcmp(got, want, sizeof got) == 0, "index_select_bwd with bad indices: the good rows differ");
    /* two bad calls (the sorted backward, then the forward): the first is reported */
    CHECK_OK(cml_index_select_bwd(gctx, gdx, gdy, gidx, 1, N_SRC, N_IDX, INNER, CML_F32));
    CHECK_OK(cml_index_select_fwd(gctx, gdy, gdx, gidx2, 1, N_SRC, N_IDX, INNER, CML_F32));
    CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, "cml_index_select_bwd: idx[23]=10 must be in");
    CHECK_OK(cml_index_select_fwd(gctx, gdy, gdx, gidx2, 1, N_SRC, N_IDX, INNER, CML_F32));
    CHECK_OK(cml_index_select_bwd(gctx, gdx, gdy, gidx, 1, N_SRC, N_IDX, INNER, CML_F32));
    CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, "cml_index_select_fwd: idx[4]=11 must be in");
    /* gather: the flat position of the index tensor */
    CHECK_OK(cml_gather_fwd(gctx, gdy, gdx, gidx2, 1, N_SRC, 5, INNER, CML_F32));
    CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, "cml_gather_fwd: idx[4]=11 must be in [0, n_src=10)");
    CHECK_OK(cml_gather_bwd(gctx, gdx, gdy, gidx, 1, N_SRC, 5, INNER, CML_F32));
    CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, "cml_gather_bwd: idx[23]=10 must be in");
    /* CML_SYNC_CHECKS=1: the call itself waits and returns the error */
    setenv("CML_SYNC_CHECKS", "1", 1);
    cml_ctx *sctx = NULL;
    CHECK_OK(cml_ctx_create(&sctx, gpu));
    unsetenv("CML_SYNC_CHECKS");
    if (sctx) {
        CHECK_STATUS(cml_index_select_bwd(sctx, gdx, gdy, gidx, 1, N_SRC, N_IDX, INNER, CML_F32),
                     CML_ERR_INVALID_ARG, "cml_index_select_bwd: idx[23]=10 must be in [0, n_src=10)");
        CHECK_MSG(strstr(cml_last_error(), "reported by") == NULL, "%s", cml_last_error());
        CHECK_STATUS(cml_gather_fwd(sctx, gdy, gdx, gidx2, 1, N_SRC, 5, INNER, CML_F32), CML_ERR_INVALID_ARG,
                     "cml_gather_fwd: idx[4]=11 must be in [0, n_src=10)");
        CHECK_OK(cml_index_select_fwd(sctx, gdy, gdx, gidx, 1, N_SRC, 20, INNER, CML_F32)); /* positions 0..19 */
        CHECK_OK(cml_ctx_synchronize(sctx));
        cml_ctx_destroy(sctx);
    }
    dev_free(gdx, sizeof dx0), dev_free(gdy, sizeof dy);
    dev_free(gidx, sizeof idx), dev_free(gidx2, sizeof idx2);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* GPT-2's embedding backward: wall time per call over a run of calls and one wait at the end (a call
 * does not wait for its stream). */
static void test_timing(void) {
    if (under_sanitizer()) return;
    const int64_t V = 50257, C = 768, N = 8192;
    const size_t nx = sizeof(float) * (size_t)(V * C), ny = sizeof(float) * (size_t)(N * C);
    int64_t *idx = malloc(sizeof(int64_t) * N);
    float *gdx = dev_alloc(nx), *gdy = dev_alloc(ny);
    int64_t *gidx = dev_alloc(sizeof(int64_t) * N);
    for (int kind = IDX_UNIFORM; kind <= IDX_SKEWED; kind++) {
        make_indices(idx, N, V, kind);
        upload(gidx, idx, sizeof(int64_t) * N);
        CHECK_OK(cml__cuda_memset(gctx, gdx, 0, nx));
        CHECK_OK(cml__cuda_memset(gctx, gdy, 0, ny));
        for (int r = 0; r < 3; r++) CHECK_OK(cml_index_select_bwd(gctx, gdx, gdy, gidx, 1, V, N, C, CML_F32));
        const int reps = 50;
        double t0 = now_s();
        for (int r = 0; r < reps; r++) CHECK_OK(cml_index_select_bwd(gctx, gdx, gdy, gidx, 1, V, N, C, CML_F32));
        CHECK_OK(cml_ctx_synchronize(gctx));
        double t = (now_s() - t0) / reps;
        printf("  timing index_select_bwd f32 (50257 x 768) <- 8192 tokens, %s indices: %.3f ms per call "
               "(%.0f GB/s of dy read + touched dx rows)\n",
               kind == IDX_UNIFORM ? "uniform" : "skewed", t * 1e3, 3.0 * (double)ny / t * 1e-9);
    }
    free(idx);
    dev_free(gdx, nx), dev_free(gdy, ny), dev_free(gidx, sizeof(int64_t) * N);
}

int main(void) {
    unsetenv("CML_SYNC_CHECKS"); /* the default context defers its reports: tested here */
    int rc = gpu_test_init(20260512);
    if (rc) return rc;
    RUN(test_shapes);
    RUN(test_bad_index);
    RUN(test_timing);
    return th_finish();
}
