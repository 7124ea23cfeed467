/* Helpers shared by the GPU tests of the row kernels (reduce, softmax,
 * cross-entropy, layernorm): device buffers through the default CUDA
 * allocator, poisoning (all bytes 0xFF: a NaN in every float dtype, -1 in
 * i64), random inputs, the norm-wise comparison of DESIGN.md section 4, and a
 * "run twice, bitwise identical" check. */
#ifndef CML_TESTS_GPU_ROW_UTIL_H
#define CML_TESTS_GPU_ROW_UTIL_H

#include "harness.h"
#include "runtime/cuda_backend.h"
#include "runtime/ctx_impl.h"

static cml_device gpu = {CML_CUDA, 0};
static cml_ctx *gctx; /* the default context of cuda:0 */
static cml_ctx *cctx; /* the default CPU context */
static cml_rng rng;

/* The shapes every row test runs: rows x cols. */
static const int64_t ROW_SHAPES[][2] = {{1, 1}, {7, 127}, {3, 1025}, {127, 4097}, {2, 262144}};
enum { N_ROW_SHAPES = 5 };
static const cml_dtype TEST_DTYPES[] = {CML_F32, CML_BF16, CML_F16};
enum { N_TEST_DTYPES = 3 };

/* Under compute-sanitizer (scripts/gpu-check sets this) the largest extra cases are left out. */
static inline bool under_sanitizer(void) { return getenv("CML_TEST_SANITIZER") != NULL; }
/* f16 shares every code path with bf16: left out under the sanitizer. */
static inline int n_test_dtypes(void) { return under_sanitizer() ? 2 : N_TEST_DTYPES; }

static inline void *dev_alloc(size_t n) {
    const cml_allocator *a = cml_allocator_default(gpu);
    void *p = NULL;
    if (!a || a->alloc(a->state, &p, n ? n : 1, cml_ctx_stream(gctx)) != CML_OK) return NULL;
    return p;
}

static inline void dev_free(void *p, size_t n) {
    const cml_allocator *a = cml_allocator_default(gpu);
    if (a && p) a->free(a->state, p, n ? n : 1, cml_ctx_stream(gctx));
}

static inline void upload(void *d, const void *h, size_t n) { CHECK_OK(cml__cuda_memcpy(gctx, d, h, n, true, "upload")); }
static inline void download(void *h, const void *d, size_t n) { CHECK_OK(cml__cuda_memcpy(gctx, h, d, n, true, "download")); }
static inline void poison(void *d, size_t n) { CHECK_OK(cml__cuda_memset(gctx, d, 0xFF, n)); }

static inline float uniform(float lo, float hi) { return lo + (hi - lo) * cml_rng_uniform(&rng); }

static inline void random_fill(void *h, cml_dtype dt, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) cml_dtype_store(h, dt, i, uniform(lo, hi));
}

static inline double tol_for(cml_dtype dt) { return dt == CML_F32 ? 1e-5 : 1e-2; }

/* ||got - want|| / ||want|| over n elements of dtype dt must be <= tol; a NaN on either
 * side fails unless both are NaN and nan_ok (rows the CPU also makes NaN). */
static inline void compare_tol(const char *what, const void *got, const void *want, cml_dtype dt, int64_t n, double tol,
                        bool nan_ok) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = cml_dtype_load(got, dt, i), w = cml_dtype_load(want, dt, i);
        if (g == w && isinf(w)) continue; /* the same overflow on both sides */
        if (isnan(g) || isnan(w) || isinf(g) || isinf(w)) {
            if (nan_ok && isnan(g) && isnan(w)) continue;
            CHECK_MSG(false, "%s: element %lld is %g on the GPU, %g on the CPU", what, (long long)i, g, w);
            return;
        }
        num += (g - w) * (g - w);
        den += w * w;
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    CHECK_MSG(rel <= tol, "%s: relative error %.3g > %.3g", what, rel, tol);
}

/* Poisons out (nbytes), runs call, downloads into got; twice, and the two must be bitwise equal. */
#define GPU_TWICE(what, out, nbytes, got, call)                                              \
    do {                                                                                     \
        const size_t nb_ = (nbytes);                                                         \
        void *again_ = malloc(nb_ > 0 ? nb_ : 1);                                            \
        poison((out), nb_);                                                                  \
        CHECK_OK(call);                                                                      \
        download((got), (out), nb_);                                                         \
        poison((out), nb_);                                                                  \
        CHECK_OK(call);                                                                      \
        download(again_, (out), nb_);                                                        \
        CHECK_MSG(memcmp((got), again_, nb_) == 0, "%s: a repeat run differs", (what));      \
        free(again_);                                                                        \
    } while (0)

/* The norm backward's staged kernel (norm_bwd_staged.cuh): the form that CML_NORM_BWD_STAGED mode `mode` gives aligned
 * rows of C columns (chunks of 16384 16-bit / 8192 f32 columns): 1 the cluster form (16-bit rows of 2..16 chunks,
 * modes 1 and 2), 2 the row-sync form (rows of more than 16 chunks in mode 2, of more than one in mode 3), 0 neither. */
static inline int staged_form(cml_dtype dt, int64_t C, int mode) {
    const int64_t chunk = dt == CML_F32 ? 8192 : 16384;
    if (mode == 0 || C <= chunk) return 0;
    if (mode == 3 || (mode == 2 && C > 16 * chunk)) return 2;
    return dt != CML_F32 && C <= 16 * chunk ? 1 : 0;
}

/* Checks which form of the staged kernel a run of `op` (the norm's name) took, from its launch counters read before and
 * after (any: a launch of the kernel, row_sync: of its row-sync form), against `form` as staged_form gives it. */
static inline void check_staged_form(const char *op, cml_dtype dt, int64_t rows, int64_t C, int form, bool any,
                                     bool row_sync) {
    CHECK_MSG(form == 2 ? row_sync : form == 1 ? any && !row_sync : !any,
              "%s %s %lld x %lld: the staged kernel: want %s, got %s", op, cml_dtype_name(dt), (long long)rows,
              (long long)C, form == 2 ? "the row-sync form" : form == 1 ? "the cluster form" : "neither",
              row_sync ? "the row-sync form" : any ? "the cluster form" : "neither");
}

/* Sets up the contexts; returns 77 (skip) without a GPU, 1 on failure, 0 to go on. */
static inline int gpu_test_init(uint64_t seed) {
    const char *why = NULL;
    if (!cml_cuda_available(&why)) {
        printf("skipped: %s\n", why);
        return 77;
    }
    gctx = cml_ctx_default(gpu);
    cctx = cml_ctx_default(CML_DEVICE_CPU);
    if (!gctx || !cctx) {
        printf("FAIL: no default context: %s\n", cml_last_error());
        return 1;
    }
    cml_rng_init(&rng, seed);
    return 0;
}

#endif
