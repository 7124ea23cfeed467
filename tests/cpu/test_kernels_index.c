/* index_select and gather, forward (exact copies) and backward (accumulation
 * with repeated indices) against float64 references. */
#include "kernel_test_util.h"

/* (outer, n_src, n_idx, inner) */
static const int64_t shapes[][4] = {
    {1, 10, 7, 1}, {3, 127, 33, 5}, {1, 1025, 3000, 64}, {2, 7, 1, 1025}, {4, 1, 9, 3}, {1, 5, 127, 300},
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

static int64_t *random_indices(int64_t count, int64_t n_src, cml_rng *rng) {
    int64_t *idx = kt_malloc((size_t)count * 8);
    for (int64_t k = 0; k < count; k++) idx[k] = (int64_t)cml_rng_below(rng, (uint32_t)n_src);
    return idx;
}

static void run_case(bool gather, const int64_t *s, cml_dtype dt, cml_rng *rng) {
    int64_t outer = s[0], n_src = s[1], n_idx = s[2], inner = s[3];
    int64_t nx = outer * n_src * inner, ny = outer * n_idx * inner;
    int64_t nidx = gather ? ny : n_idx;
    int64_t *idx = random_indices(nidx, n_src, rng);
    cml_layout xl = kt_layout(1, &nx), yl = kt_layout(1, &ny);
    kt_view x = kt_view_alloc(xl, dt), y = kt_view_alloc(yl, dt);
    kt_fill_uniform(&x, -3, 3, rng);
    cml_status st = gather ? cml_gather_fwd(kt_ctx(), y.data, x.data, idx, outer, n_src, n_idx, inner, dt)
                           : cml_index_select_fwd(kt_ctx(), y.data, x.data, idx, outer, n_src, n_idx, inner, dt);
    CHECK_OK(st);
    int wrong = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n_idx; j++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t k = (o * n_idx + j) * inner + i;
                int64_t src = gather ? idx[k] : idx[j];
                wrong += kt_get(&y, k) != kt_get(&x, (o * n_src + src) * inner + i);
            }
    CHECK_MSG(wrong == 0, "%s fwd (%lld,%lld,%lld,%lld) %s: %d wrong", gather ? "gather" : "index_select",
              (long long)outer, (long long)n_src, (long long)n_idx, (long long)inner, cml_dtype_name(dt), wrong);

    if (cml_dtype_is_float(dt)) { /* backward: dx (pre-filled, accumulated into) += scattered dy */
        kt_view dx = kt_view_alloc(xl, dt), dy = kt_view_alloc(yl, dt);
        kt_fill_uniform(&dx, -1, 1, rng);
        kt_fill_uniform(&dy, -1, 1, rng);
        double *ref = kt_malloc((size_t)nx * 8);
        float *out = kt_malloc((size_t)nx * 4);
        for (int64_t k = 0; k < nx; k++) ref[k] = kt_get(&dx, k);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < n_idx; j++)
                for (int64_t i = 0; i < inner; i++) {
                    int64_t k = (o * n_idx + j) * inner + i;
                    int64_t dst = gather ? idx[k] : idx[j];
                    ref[(o * n_src + dst) * inner + i] += kt_get(&dy, k);
                }
        st = gather ? cml_gather_bwd(kt_ctx(), dx.data, dy.data, idx, outer, n_src, n_idx, inner, dt)
                    : cml_index_select_bwd(kt_ctx(), dx.data, dy.data, idx, outer, n_src, n_idx, inner, dt);
        CHECK_OK(st);
        for (int64_t k = 0; k < nx; k++) out[k] = (float)kt_get(&dx, k);
        /* bf16 rounds after every add of a repeated index: scale the tolerance */
        KT_CHECK_CLOSE(out, ref, nx, dt == CML_F32 ? 1e-5 : 3e-2, "%s bwd (%lld,%lld,%lld,%lld) %s",
                       gather ? "gather" : "index_select", (long long)outer, (long long)n_src, (long long)n_idx,
                       (long long)inner, cml_dtype_name(dt));
        free(ref);
        free(out);
        kt_view_free(&dx);
        kt_view_free(&dy);
    }
    free(idx);
    kt_view_free(&x);
    kt_view_free(&y);
}

static void test_index_select(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 30);
    for (int s = 0; s < NSHAPES; s++) run_case(false, shapes[s], CML_F32, &rng);
    run_case(false, shapes[1], CML_BF16, &rng);
    run_case(false, shapes[1], CML_I64, &rng);
    run_case(false, shapes[4], CML_U8, &rng);
}

static void test_gather(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 31);
    for (int s = 0; s < NSHAPES; s++) run_case(true, shapes[s], CML_F32, &rng);
    run_case(true, shapes[1], CML_F16, &rng);
    run_case(true, shapes[3], CML_I32, &rng);
}

/* Backward twice from the same start: bit-identical despite repeated indices and threads. */
static void test_deterministic(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 32);
    const int64_t outer = 1, n_src = 50, n_idx = 4000, inner = 64;
    int64_t *idx = random_indices(outer * n_idx * inner, n_src, &rng);
    int64_t nx = outer * n_src * inner, ny = outer * n_idx * inner;
    float *dy = kt_malloc((size_t)ny * 4), *dx1 = kt_malloc((size_t)nx * 4), *dx2 = kt_malloc((size_t)nx * 4);
    th_fill_uniform(dy, ny, -1, 1, &rng);
    for (int gather = 0; gather < 2; gather++) {
        memset(dx1, 0, (size_t)nx * 4);
        memset(dx2, 0, (size_t)nx * 4);
        if (gather) {
            CHECK_OK(cml_gather_bwd(kt_ctx(), dx1, dy, idx, outer, n_src, n_idx, inner, CML_F32));
            CHECK_OK(cml_gather_bwd(kt_ctx(), dx2, dy, idx, outer, n_src, n_idx, inner, CML_F32));
        } else {
            CHECK_OK(cml_index_select_bwd(kt_ctx(), dx1, dy, idx, outer, n_src, n_idx, inner, CML_F32));
            CHECK_OK(cml_index_select_bwd(kt_ctx(), dx2, dy, idx, outer, n_src, n_idx, inner, CML_F32));
        }
        CHECK(memcmp(dx1, dx2, (size_t)nx * 4) == 0);
    }
    free(idx);
    free(dy);
    free(dx1);
    free(dx2);
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float x[40] = {0}, y[40] = {0};
    int64_t idx[4] = {0, 3, 10, 1};
    int32_t xi[40] = {0};
    CHECK_STATUS(cml_index_select_fwd(ctx, y, x, idx, 1, 10, 4, 2, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_index_select_fwd: idx[2]=10 must be in [0, n_src=10)");
    CHECK(y[0] == 0); /* nothing written */
    CHECK_STATUS(cml_index_select_bwd(ctx, x, y, idx, 1, 10, 4, 2, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_index_select_bwd: idx[2]=10");
    CHECK_STATUS(cml_index_select_bwd(ctx, xi, xi, idx, 1, 10, 2, 2, CML_I32), CML_ERR_DTYPE,
                 "cml_index_select_bwd: dtype=i32 must be a floating-point dtype");
    idx[2] = -1;
    CHECK_STATUS(cml_gather_fwd(ctx, y, x, idx, 1, 10, 4, 1, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_gather_fwd: idx[2]=-1 must be in [0, n_src=10)");
    CHECK_STATUS(cml_gather_bwd(ctx, x, y, idx, 1, 10, -4, 1, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_gather_bwd: n_idx=-4 must be >= 0");
    CHECK_STATUS(cml_gather_bwd(ctx, x, y, NULL, 1, 10, 4, 1, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_gather_bwd: idx must not be NULL");
    CHECK_STATUS(cml_index_select_fwd(NULL, y, x, idx, 1, 10, 4, 1, CML_F32), CML_ERR_INVALID_ARG,
                 "ctx must not be NULL");
    cml_ctx cuda = kt_fake_cuda_ctx_unusable();
    KT_CHECK_CUDA_DISPATCH(cml_gather_bwd(&cuda, x, y, idx, 1, 10, 4, 1, CML_F32));
}

int main(void) {
    RUN(test_index_select);
    RUN(test_gather);
    RUN(test_deterministic);
    RUN(test_errors);
    return kt_finish();
}
