/* Helpers shared by the kernel-layer tests (tests/cpu/test_kernels_*.c):
 * a CPU context, strided views with their own storage, float64 element
 * access, and a norm-wise comparison that prints what failed. Header-only
 * (static functions) so that each test stays one self-contained program. */
#ifndef CML_TESTS_KERNEL_TEST_UTIL_H
#define CML_TESTS_KERNEL_TEST_UTIL_H

#include "harness.h"
#include "runtime/ctx_impl.h"

#define KT_SEED 0x5EEDC0FFEEull

static cml_ctx *kt_ctx_instance;

/* One CPU context for the whole test program (freed at exit by kt_finish). */
static inline cml_ctx *kt_ctx(void) {
    if (!kt_ctx_instance) {
        if (cml_ctx_create(&kt_ctx_instance, CML_DEVICE_CPU) != CML_OK) {
            fprintf(stderr, "cannot create a CPU context: %s\n", cml_last_error());
            exit(1);
        }
    }
    return kt_ctx_instance;
}

/* A context that claims to be on cuda:0, to check that kernels without a CUDA
 * implementation say so. Kernels with one get the ordinal cuda:63 (see
 * kt_fake_cuda_ctx_unusable) so that, even on a GPU machine, they fail to
 * select the device instead of running on host pointers. */
static inline cml_ctx kt_fake_cuda_ctx(void) {
    cml_ctx c;
    memset(&c, 0, sizeof c);
    c.device.type = CML_CUDA;
    return c;
}

static inline cml_ctx kt_fake_cuda_ctx_unusable(void) {
    cml_ctx c = kt_fake_cuda_ctx();
    c.device.index = 63;
    return c;
}

/* A kernel with a CUDA implementation, called on the fake context above, must leave the
 * CPU path alone: CML_ERR_UNSUPPORTED in a build without CUDA, CML_ERR_CUDA (the fake
 * context's device cannot be used) in a CUDA build; never CML_OK. */
#define KT_CHECK_CUDA_DISPATCH(expr)                                                               \
    do {                                                                                           \
        cml_status kt_s = (expr);                                                                  \
        CHECK_MSG(kt_s == CML_ERR_UNSUPPORTED || kt_s == CML_ERR_CUDA,                             \
                  "%s on a (fake) CUDA context returned %s; expected UNSUPPORTED or CUDA", #expr,   \
                  cml_status_name(kt_s));                                                          \
    } while (0)

static inline int kt_finish(void) {
    cml_ctx_destroy(kt_ctx_instance);
    kt_ctx_instance = NULL;
    return th_finish();
}

static inline void *kt_malloc(size_t nbytes) {
    void *p = malloc(nbytes ? nbytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", nbytes);
        exit(1);
    }
    return p;
}

/* Contiguous row-major layout. */
static inline cml_layout kt_layout(int ndim, const int64_t *shape) {
    cml_layout l;
    memset(&l, 0, sizeof l);
    l.ndim = ndim;
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        l.shape[d] = shape[d];
        l.stride[d] = s;
        s *= shape[d];
    }
    return l;
}

/* A view of `shape` whose memory is row-major in the dim order perm (so
 * perm = {1, 0} on a 2-d shape is a transposed matrix). */
static inline cml_layout kt_layout_permuted(int ndim, const int64_t *shape, const int *perm) {
    cml_layout l;
    memset(&l, 0, sizeof l);
    l.ndim = ndim;
    int64_t s = 1;
    for (int j = ndim - 1; j >= 0; j--) {
        l.shape[perm[j]] = shape[perm[j]];
        l.stride[perm[j]] = s;
        s *= shape[perm[j]];
    }
    for (int d = 0; d < ndim; d++) l.shape[d] = shape[d];
    return l;
}

static inline int64_t kt_numel(const cml_layout *l) {
    int64_t n = 1;
    for (int d = 0; d < l->ndim; d++) n *= l->shape[d];
    return n;
}

/* Element offset of row-major linear index lin of the view. */
static inline int64_t kt_offset(const cml_layout *l, int64_t lin) {
    int64_t off = 0;
    for (int d = l->ndim - 1; d >= 0; d--) {
        off += (lin % l->shape[d]) * l->stride[d];
        lin /= l->shape[d];
    }
    return off;
}

/* A strided view that owns its storage; data points at element (0, ..., 0),
 * which is not the start of storage when strides are negative. */
typedef struct kt_view {
    cml_layout layout;
    cml_dtype dtype;
    void *storage;
    void *data;
    int64_t storage_elems;
} kt_view;

static inline kt_view kt_view_alloc(cml_layout layout, cml_dtype dt) {
    kt_view v;
    v.layout = layout;
    v.dtype = dt;
    int64_t lo = 0, hi = 0;
    for (int d = 0; d < layout.ndim; d++) {
        if (layout.shape[d] == 0) continue;
        int64_t span = (layout.shape[d] - 1) * layout.stride[d];
        if (span < 0) lo += span;
        else hi += span;
    }
    v.storage_elems = hi - lo + 1;
    size_t es = cml_dtype_size(dt);
    v.storage = kt_malloc((size_t)v.storage_elems * es);
    th_poison(v.storage, (size_t)v.storage_elems * es);
    v.data = (char *)v.storage + (-lo) * (int64_t)es;
    return v;
}

static inline void kt_view_free(kt_view *v) {
    free(v->storage);
    v->storage = v->data = NULL;
}

/* Element lin (row-major over the view's shape) as a double. */
static inline double kt_get(const kt_view *v, int64_t lin) {
    return (double)cml_dtype_load(v->data, v->dtype, kt_offset(&v->layout, lin));
}

/* Fills every storage element with uniform values in [lo, hi) rounded to the dtype. */
static inline void kt_fill_uniform(kt_view *v, float lo, float hi, cml_rng *rng) {
    for (int64_t i = 0; i < v->storage_elems; i++)
        cml_dtype_store(v->storage, v->dtype, i, lo + (hi - lo) * cml_rng_uniform(rng));
}

/* Tolerance for a norm-wise relative error, by the dtypes the result passed through. */
static inline double kt_tol(cml_dtype dt) { return dt == CML_F32 ? 1e-5 : (dt == CML_F16 || dt == CML_BF16) ? 1e-2 : 1e-1; }

/* Checks th_rel_error(out, ref) <= tol and says which case failed. */
#define KT_CHECK_CLOSE(out, ref, n, tol, ...)                                                 \
    do {                                                                                     \
        double kt_err = th_rel_error((out), (ref), (n));                                     \
        if (!(kt_err <= (tol))) {                                                            \
            th_failed_checks++;                                                              \
            fprintf(stderr, "  %s:%d: rel error %.3g > %.3g for ", __FILE__, __LINE__, kt_err, \
                    (double)(tol));                                                          \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
        }                                                                                    \
    } while (0)

#endif
