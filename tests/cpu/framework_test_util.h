/* Helpers shared by the framework tests (tests/cpu/test_tensor.c,
 * test_autograd.c, test_ops_*.c): random tensors in several memory layouts,
 * a strided N-d reader that is independent of the framework (it walks
 * shape/strides itself), NumPy broadcasting of a multi-index, float64
 * comparisons and a gradcheck wrapper. Header-only (static functions) so that
 * each test stays one self-contained program. */
#ifndef CML_TESTS_FRAMEWORK_TEST_UTIL_H
#define CML_TESTS_FRAMEWORK_TEST_UTIL_H

#include <stdbool.h>

#include "harness.h"

#define FT_SEED 0xF7A3C0DEull
#define FT_PI 3.14159265358979323846
#define FT_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* A shape literal for tables: {ndim, {d0, d1, ...}}. */
typedef struct ft_shape {
    int ndim;
    int64_t d[CML_MAX_DIMS];
} ft_shape;

static inline void *ft_malloc(size_t nbytes) {
    void *p = malloc(nbytes ? nbytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", nbytes);
        exit(1);
    }
    return p;
}

static inline int64_t ft_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* Advances a row-major multi-index; false once it wraps around (or for empty shapes). */
static inline bool ft_next(int ndim, const int64_t *shape, int64_t *idx) {
    for (int d = ndim - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* Row-major linear index of out_idx (over an out_ndim result) in an input of
 * (ndim, shape) broadcast to that result (NumPy rules: align right, size-1 dims repeat). */
static inline int64_t ft_bcast(int out_ndim, const int64_t *out_idx, int ndim, const int64_t *shape) {
    int64_t lin = 0;
    for (int d = 0; d < ndim; d++) {
        int od = out_ndim - ndim + d;
        int64_t i = shape[d] == 1 ? 0 : out_idx[od];
        lin = lin * shape[d] + i;
    }
    return lin;
}

/* NumPy broadcast of two shapes (the test's own rule; assumes they fit). */
static inline int ft_broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int64_t *out) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        out[i] = da == 1 ? db : da;
    }
    return n;
}

/* One element at a storage offset of a host buffer, as a double. */
static inline double ft_load(const void *data, cml_dtype dt, int64_t off) {
    switch (dt) {
    case CML_I64: return (double)((const int64_t *)data)[off];
    case CML_I32: return (double)((const int32_t *)data)[off];
    default: return (double)cml_dtype_load(data, dt, off);
    }
}

/* All elements of a (possibly strided, broadcast) CPU tensor in row-major
 * order as doubles, read by walking shape and strides here (not through the
 * framework's copy or item functions). Caller frees. */
static inline double *ft_read(const cml_tensor *t) {
    int nd = cml_tensor_ndim(t);
    const int64_t *shape = cml_tensor_shape(t);
    int64_t n = ft_numel(nd, shape);
    double *v = ft_malloc((size_t)n * sizeof *v);
    if (n == 0) return v;
    const void *data = cml_tensor_data(t);
    int64_t idx[CML_MAX_DIMS] = {0};
    int64_t k = 0;
    do {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += idx[d] * cml_tensor_stride(t, d);
        v[k++] = ft_load(data, cml_tensor_dtype(t), off);
    } while (ft_next(nd, shape, idx));
    return v;
}

static inline bool ft_same_shape(const cml_tensor *t, int ndim, const int64_t *shape) {
    if (cml_tensor_ndim(t) != ndim) return false;
    for (int d = 0; d < ndim; d++)
        if (cml_tensor_shape(t)[d] != shape[d]) return false;
    return true;
}

static inline const char *ft_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < n) snprintf(buf + used, n - used, ")");
    return buf;
}

/* Checks t's shape and that its values match ref (row-major float64) with a
 * norm-wise relative error <= rtol (absolute when ref is all zero); NaN never
 * passes. Returns whether it passed. */
static inline bool ft_check_close_at(const char *file, int line, const cml_tensor *t, int ndim,
                                     const int64_t *shape, const double *ref, double rtol, const char *what) {
    char a[128], b[128];
    if (!t) {
        th_failed_checks++;
        fprintf(stderr, "  %s:%d: %s: result is NULL: %s\n", file, line, what, cml_last_error());
        return false;
    }
    if (!ft_same_shape(t, ndim, shape)) {
        th_failed_checks++;
        fprintf(stderr, "  %s:%d: %s: shape %s, expected %s\n", file, line, what,
                ft_shape_str(cml_tensor_ndim(t), cml_tensor_shape(t), a, sizeof a),
                ft_shape_str(ndim, shape, b, sizeof b));
        return false;
    }
    int64_t n = ft_numel(ndim, shape);
    double *v = ft_read(t);
    double num = 0, den = 0, worst = 0;
    int64_t worst_i = -1;
    bool nan = false;
    for (int64_t i = 0; i < n; i++) {
        if (!isnan(v[i]) != !isnan(ref[i])) nan = true;
        if (isnan(ref[i])) continue;
        double d = v[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
        if (fabs(d) > worst || worst_i < 0) {
            worst = fabs(d);
            worst_i = i;
        }
    }
    double err = den > 0 ? sqrt(num / den) : sqrt(num);
    bool ok = !nan && err <= rtol;
    if (!ok) {
        th_failed_checks++;
        fprintf(stderr, "  %s:%d: %s: rel error %.3g > %.3g%s", file, line, what, err, rtol, nan ? " (NaN)" : "");
        if (worst_i >= 0)
            fprintf(stderr, "; worst element %lld: got %.9g want %.9g", (long long)worst_i, v[worst_i], ref[worst_i]);
        fputc('\n', stderr);
    }
    free(v);
    return ok;
}
#define FT_CHECK_CLOSE(t, ndim, shape, ref, rtol, what) \
    ft_check_close_at(__FILE__, __LINE__, (t), (ndim), (shape), (ref), (rtol), (what))

/* Exact comparison (integer results, copies). */
static inline bool ft_check_equal_at(const char *file, int line, const cml_tensor *t, int ndim,
                                     const int64_t *shape, const double *ref, const char *what) {
    if (!ft_check_close_at(file, line, t, ndim, shape, ref, INFINITY, what)) return false;
    int64_t n = ft_numel(ndim, shape);
    double *v = ft_read(t);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        if (v[i] != ref[i]) {
            th_failed_checks++;
            fprintf(stderr, "  %s:%d: %s: element %lld is %.9g, expected %.9g\n", file, line, what, (long long)i,
                    v[i], ref[i]);
            ok = false;
        }
    }
    free(v);
    return ok;
}
#define FT_CHECK_EQUAL(t, ndim, shape, ref, what) \
    ft_check_equal_at(__FILE__, __LINE__, (t), (ndim), (shape), (ref), (what))

/* ---- random inputs ----------------------------------------------------------- */

/* How values are drawn: uniform in [lo, hi); with grid > 0 only lo + k*grid
 * (so two draws differ by 0 or >= grid: no near-ties); with random_sign the
 * value is negated half of the time (|x| stays in [lo, hi), away from 0). */
typedef struct ft_dist {
    double lo, hi, grid;
    bool random_sign;
} ft_dist;

#define FT_UNIFORM(lo, hi) ((ft_dist){(lo), (hi), 0.0, false})
#define FT_AWAY_FROM_ZERO(lo, hi) ((ft_dist){(lo), (hi), 0.0, true})
#define FT_GRID(lo, hi, step) ((ft_dist){(lo), (hi), (step), false})

static inline double ft_draw(ft_dist d, cml_rng *rng) {
    double u = cml_rng_uniform(rng);
    double v;
    if (d.grid > 0) {
        int64_t k = (int64_t)(u * ((d.hi - d.lo) / d.grid));
        v = d.lo + (double)k * d.grid;
    } else {
        v = d.lo + (d.hi - d.lo) * u;
    }
    if (d.random_sign && (cml_rng_u32(rng) & 1u)) v = -v;
    return v;
}

/* Memory layouts a test input can have. */
typedef enum ft_layout_kind {
    FT_CONTIG = 0,
    FT_PERMUTED, /* stored in reversed dim order, then permuted back (a transposed view) */
    FT_STRIDED,  /* every other element of a twice-as-long last dim, at an offset (a sliced view) */
    FT_LAYOUT_COUNT
} ft_layout_kind;

static const char *const ft_layout_name[FT_LAYOUT_COUNT] = {"contiguous", "permuted", "strided"};

/* An f32 CPU tensor of `shape` with values from dist, laid out as `kind`. */
static inline cml_tensor *ft_make(int ndim, const int64_t *shape, ft_layout_kind kind, ft_dist dist, cml_rng *rng) {
    int64_t base_shape[CML_MAX_DIMS];
    for (int d = 0; d < ndim; d++) base_shape[d] = shape[d];
    if (kind == FT_PERMUTED)
        for (int d = 0; d < ndim; d++) base_shape[d] = shape[ndim - 1 - d];
    if (kind == FT_STRIDED && ndim > 0) base_shape[ndim - 1] = 2 * shape[ndim - 1] + 1;
    int64_t n = ft_numel(ndim, base_shape);
    float *v = ft_malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)ft_draw(dist, rng);
    cml_tensor *base = cml_tensor_from_host(v, ndim, base_shape, CML_F32, CML_DEVICE_CPU);
    free(v);
    if (!base || ndim == 0 || kind == FT_CONTIG) return base;
    cml_tensor *t;
    if (kind == FT_PERMUTED) {
        int perm[CML_MAX_DIMS];
        for (int d = 0; d < ndim; d++) perm[d] = ndim - 1 - d;
        t = cml_permute(base, perm);
    } else {
        t = cml_slice(base, ndim - 1, 1, INT64_MAX, 2);
    }
    cml_tensor_release(base);
    return t;
}

/* A contiguous f32 tensor holding a random permutation of
 * (k - n/2) * spacing, k = 0..n-1: all values distinct (no ties for max/min,
 * none closer than spacing). */
static inline cml_tensor *ft_make_distinct(int ndim, const int64_t *shape, double spacing, cml_rng *rng) {
    int64_t n = ft_numel(ndim, shape);
    float *v = ft_malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)((double)(i - n / 2) * spacing);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)cml_rng_below(rng, (uint32_t)(i + 1));
        float t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    cml_tensor *t = cml_tensor_from_host(v, ndim, shape, CML_F32, CML_DEVICE_CPU);
    free(v);
    return t;
}

/* A contiguous f32 leaf that requires grad (what cml_gradcheck perturbs). */
static inline cml_tensor *ft_leaf(int ndim, const int64_t *shape, ft_dist dist, cml_rng *rng) {
    cml_tensor *t = ft_make(ndim, shape, FT_CONTIG, dist, rng);
    cml_tensor_set_requires_grad(t, true);
    return t;
}

/* An f32 tensor from literal values. */
static inline cml_tensor *ft_from(int ndim, const int64_t *shape, const float *values) {
    return cml_tensor_from_host(values, ndim, shape, CML_F32, CML_DEVICE_CPU);
}

/* An i64 tensor from literal values. */
static inline cml_tensor *ft_from_i64(int ndim, const int64_t *shape, const int64_t *values) {
    return cml_tensor_from_host(values, ndim, shape, CML_I64, CML_DEVICE_CPU);
}

/* ---- gradients ------------------------------------------------------------------- */

/* cml_gradcheck with the defaults (plus a seed), reporting `what` on failure. */
static inline void ft_gradcheck_at(const char *file, int line, cml_grad_fn f, cml_tensor *const *inputs, int n,
                                   void *user, const char *what) {
    cml_gradcheck_opts opts = {1e-3, 2e-3, 1e-2, 7};
    cml_clear_error();
    cml_status s = cml_gradcheck(f, inputs, n, user, &opts);
    if (s != CML_OK) {
        th_failed_checks++;
        fprintf(stderr, "  %s:%d: gradcheck of %s: %s: %s\n", file, line, what, cml_status_name(s),
                cml_last_error());
    }
}
#define FT_GRADCHECK(f, inputs, n, user, what) ft_gradcheck_at(__FILE__, __LINE__, (f), (inputs), (n), (user), (what))

/* A NULL-safe release of several tensors. */
#define FT_RELEASE(...)                                                               \
    do {                                                                              \
        cml_tensor *ft_r[] = {__VA_ARGS__};                                           \
        cml_tensor_release_all(ft_r, (int)(sizeof ft_r / sizeof ft_r[0]));            \
    } while (0)

#endif
