/* Reductions (sum, mean, max, min, var, argmax) over single axes, several
 * non-adjacent axes, all axes, with and without keepdim, on contiguous and
 * non-contiguous inputs: forward against a float64 reference, gradients by
 * finite differences, first-index semantics for ties, and the error paths. */
#include "framework_test_util.h"

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_VAR0, R_VAR1, R_OP_COUNT };
static const char *const r_names[R_OP_COUNT] = {"sum", "mean", "max", "min", "var(correction=0)",
                                                "var(correction=1)"};

static cml_tensor *reduce_apply(int op, const cml_tensor *x, const int *dims, int n_dims, bool keepdim) {
    switch (op) {
    case R_SUM: return cml_sum(x, dims, n_dims, keepdim);
    case R_MEAN: return cml_mean(x, dims, n_dims, keepdim);
    case R_MAX: return cml_max(x, dims, n_dims, keepdim);
    case R_MIN: return cml_min(x, dims, n_dims, keepdim);
    case R_VAR0: return cml_var(x, dims, n_dims, 0, keepdim);
    default: return cml_var(x, dims, n_dims, 1, keepdim);
    }
}

/* Which dims of an ndim tensor the (dims, n_dims) argument reduces. */
static void reduced_mask(int ndim, const int *dims, int n_dims, bool *mask) {
    for (int d = 0; d < ndim; d++) mask[d] = n_dims == 0;
    for (int i = 0; i < n_dims; i++) mask[dims[i] < 0 ? dims[i] + ndim : dims[i]] = true;
}

/* The result shape with or without keepdim. */
static int result_shape(int ndim, const int64_t *shape, const bool *mask, bool keepdim, int64_t *out) {
    int n = 0;
    for (int d = 0; d < ndim; d++)
        if (!mask[d] || keepdim) out[n++] = mask[d] ? 1 : shape[d];
    return n;
}

/* float64 reference of op over the masked dims of x (row-major values v). */
static double *reduce_reference(int op, const double *v, int ndim, const int64_t *shape, const bool *mask) {
    int64_t keep[CML_MAX_DIMS];
    for (int d = 0; d < ndim; d++) keep[d] = mask[d] ? 1 : shape[d];
    int64_t n_out = ft_numel(ndim, keep), n = ft_numel(ndim, shape), count = n / n_out;
    double *sum = calloc((size_t)n_out, sizeof *sum), *ext = ft_malloc((size_t)n_out * sizeof *ext);
    int64_t *seen = calloc((size_t)n_out, sizeof *seen);
    if (!sum || !seen) exit(1);
    int64_t idx[CML_MAX_DIMS] = {0}, oidx[CML_MAX_DIMS];
    for (int64_t k = 0; k < n; k++) {
        for (int d = 0; d < ndim; d++) oidx[d] = mask[d] ? 0 : idx[d];
        int64_t o = ft_bcast(ndim, oidx, ndim, keep);
        sum[o] += v[k];
        if (!seen[o]++ || (op == R_MAX && v[k] > ext[o]) || (op == R_MIN && v[k] < ext[o])) ext[o] = v[k];
        ft_next(ndim, shape, idx);
    }
    if (op == R_VAR0 || op == R_VAR1) { /* two passes: sum of squared deviations from the mean */
        double *ss = calloc((size_t)n_out, sizeof *ss);
        if (!ss) exit(1);
        memset(idx, 0, sizeof idx);
        for (int64_t k = 0; k < n; k++) {
            for (int d = 0; d < ndim; d++) oidx[d] = mask[d] ? 0 : idx[d];
            int64_t o = ft_bcast(ndim, oidx, ndim, keep);
            double dev = v[k] - sum[o] / (double)count;
            ss[o] += dev * dev;
            ft_next(ndim, shape, idx);
        }
        for (int64_t o = 0; o < n_out; o++) ext[o] = ss[o] / (double)(count - (op == R_VAR1));
        free(ss);
    } else if (op == R_SUM || op == R_MEAN) {
        for (int64_t o = 0; o < n_out; o++) ext[o] = op == R_SUM ? sum[o] : sum[o] / (double)count;
    }
    free(sum);
    free(seen);
    return ext;
}

typedef struct dims_case {
    int n;
    int dims[4];
} dims_case;

/* On a 3-d input: single axes (also negative), non-adjacent, adjacent, all (implicitly and explicitly), unordered. */
static const dims_case dims3[] = {
    {1, {0}}, {1, {1}}, {1, {-1}}, {2, {0, 2}}, {2, {2, 0}}, {2, {1, 2}}, {0, {0}}, {3, {0, 1, 2}}, {2, {-3, 1}},
};

static void check_reduce_case(int op, const cml_tensor *x, const dims_case *dc, bool keepdim, double tol,
                              const char *ctx) {
    int nd = cml_tensor_ndim(x);
    bool mask[CML_MAX_DIMS];
    reduced_mask(nd, dc->dims, dc->n, mask);
    int64_t oshape[CML_MAX_DIMS];
    int ond = result_shape(nd, cml_tensor_shape(x), mask, keepdim, oshape);
    double *v = ft_read(x);
    double *ref = reduce_reference(op, v, nd, cml_tensor_shape(x), mask);
    cml_tensor *y = reduce_apply(op, x, dc->n ? dc->dims : NULL, dc->n, keepdim);
    char what[192];
    snprintf(what, sizeof what, "%s over %d dims (%d, %d) keepdim=%d %s", r_names[op], dc->n, dc->dims[0],
             dc->n > 1 ? dc->dims[1] : -99, keepdim, ctx);
    FT_CHECK_CLOSE(y, ond, oshape, ref, tol, what);
    if (y) CHECK(cml_tensor_dtype(y) == CML_F32);
    free(v);
    free(ref);
    cml_tensor_release(y);
}

static void test_reduce_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 10);
    static const ft_shape shapes3[] = {{3, {3, 4, 5}}, {3, {2, 1, 6}}, {3, {1, 3, 1}}};
    for (int op = 0; op < R_OP_COUNT; op++) {
        for (int s = 0; s < FT_LEN(shapes3); s++) {
            for (int l = 0; l < FT_LAYOUT_COUNT; l++) {
                cml_tensor *x = ft_make(3, shapes3[s].d, (ft_layout_kind)l, FT_UNIFORM(-2, 3), &rng);
                CHECK_NOT_NULL(x);
                for (int dci = 0; x && dci < FT_LEN(dims3); dci++) {
                    bool mask[CML_MAX_DIMS];
                    reduced_mask(3, dims3[dci].dims, dims3[dci].n, mask);
                    int64_t count = 1;
                    for (int d = 0; d < 3; d++)
                        if (mask[d]) count *= shapes3[s].d[d];
                    if (op == R_VAR1 && count < 2) continue; /* no degrees of freedom: an error, tested below */
                    for (int keep = 0; keep < 2; keep++) {
                        char ctx[64];
                        snprintf(ctx, sizeof ctx, "shape %d %s", s, ft_layout_name[l]);
                        check_reduce_case(op, x, &dims3[dci], keep, 2e-6, ctx);
                    }
                }
                cml_tensor_release(x);
            }
        }
        /* 0-d and 1-d inputs over all axes. */
        int64_t s1[1] = {9};
        cml_tensor *x0 = ft_make(0, NULL, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
        cml_tensor *x1 = ft_make(1, s1, FT_STRIDED, FT_UNIFORM(-1, 1), &rng);
        dims_case all = {0, {0}}, last = {1, {-1}};
        for (int keep = 0; keep < 2; keep++) {
            if (op != R_VAR1) check_reduce_case(op, x0, &all, keep, 2e-6, "0-d");
            check_reduce_case(op, x1, &all, keep, 2e-6, "1-d strided");
            check_reduce_case(op, x1, &last, keep, 2e-6, "1-d strided");
        }
        FT_RELEASE(x0, x1);
    }
}

/* A larger reduction, where naive float32 accumulation would drift: DESIGN.md asks ~1e-5 relative. */
static void test_sum_large(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 11);
    int64_t shape[2] = {64, 4097};
    cml_tensor *x = ft_make(2, shape, FT_CONTIG, FT_UNIFORM(0, 1), &rng);
    dims_case all = {0, {0}}, rows = {1, {1}}, cols = {1, {0}};
    check_reduce_case(R_SUM, x, &all, false, 1e-5, "64x4097");
    check_reduce_case(R_SUM, x, &rows, false, 1e-5, "64x4097");
    check_reduce_case(R_MEAN, x, &cols, true, 1e-5, "64x4097");
    check_reduce_case(R_VAR1, x, &rows, false, 1e-5, "64x4097");
    cml_tensor_release(x);
}

typedef struct reduce_gc {
    int op;
    const dims_case *dc;
    bool keepdim;
    bool permute; /* reduce a transposed view of the input */
} reduce_gc;

static cml_tensor *reduce_gc_fn(cml_tensor *const *in, int n, void *user) {
    const reduce_gc *u = user;
    if (!u->permute) return reduce_apply(u->op, in[0], u->dc->n ? u->dc->dims : NULL, u->dc->n, u->keepdim);
    int perm[3] = {2, 0, 1};
    cml_tensor *v = cml_permute(in[0], perm);
    cml_tensor *y = reduce_apply(u->op, v, u->dc->n ? u->dc->dims : NULL, u->dc->n, u->keepdim);
    cml_tensor_release(v);
    return y;
}

static void test_reduce_gradients(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 12);
    int64_t shape[3] = {3, 4, 5}, pshape[3] = {4, 5, 3}; /* pshape permuted by {2, 0, 1} is shape */
    for (int op = 0; op < R_OP_COUNT; op++) {
        for (int dci = 0; dci < FT_LEN(dims3); dci++) {
            for (int variant = 0; variant < 3; variant++) {
                reduce_gc u = {op, &dims3[dci], variant == 1, variant == 2};
                /* distinct values 0.05 apart: max/min have a unique winner, far from a tie */
                cml_tensor *x = ft_make_distinct(3, u.permute ? pshape : shape, 0.05, &rng);
                cml_tensor_set_requires_grad(x, true);
                char what[160];
                snprintf(what, sizeof what, "%s dims case %d variant %d", r_names[op], dci, variant);
                FT_GRADCHECK(reduce_gc_fn, &x, 1, &u, what);
                cml_tensor_release(x);
            }
        }
    }
    /* 0-d */
    for (int op = 0; op < R_VAR1; op++) {
        dims_case all = {0, {0}};
        reduce_gc u = {op, &all, false, false};
        cml_tensor *x = ft_leaf(0, NULL, FT_UNIFORM(-1, 1), &rng);
        FT_GRADCHECK(reduce_gc_fn, &x, 1, &u, r_names[op]);
        cml_tensor_release(x);
    }
}

/* max/min send the whole gradient to the first extremum. */
static void test_extremum_ties(void) {
    int64_t s4[1] = {4};
    const float xv[4] = {2, 5, 5, 1}, nv[4] = {3, 1, 1, 4};
    cml_tensor *x = ft_from(1, s4, xv), *xn = ft_from(1, s4, nv);
    cml_tensor_set_requires_grad(x, true);
    cml_tensor_set_requires_grad(xn, true);
    cml_tensor *m = cml_max(x, NULL, 0, false), *mn = cml_min(xn, NULL, 0, false);
    CHECK(m && cml_tensor_item(m) == 5.0);
    CHECK(mn && cml_tensor_item(mn) == 1.0);
    CHECK_OK(cml_backward(m, NULL));
    CHECK_OK(cml_backward(mn, NULL));
    const double want[4] = {0, 1, 0, 0};
    FT_CHECK_EQUAL(cml_tensor_grad(x), 1, s4, want, "max tie gradient");
    FT_CHECK_EQUAL(cml_tensor_grad(xn), 1, s4, want, "min tie gradient");
    FT_RELEASE(x, xn, m, mn);

    /* Along dim 1 of a transposed (non-contiguous) view: the first maximum of each row. */
    const float tv[8] = {7, 1, 7, 0, 2, 9, 2, 9}; /* stored (4, 2); viewed transposed as (2, 4) */
    int64_t s42[2] = {4, 2};
    cml_tensor *base = ft_from(2, s42, tv);
    cml_tensor_set_requires_grad(base, true);
    cml_tensor *v = cml_transpose(base, 0, 1); /* [[7, 7, 2, 2], [1, 0, 9, 9]] */
    int d1 = 1;
    cml_tensor *mx = cml_max(v, &d1, 1, false);
    const double want_max[2] = {7, 9};
    int64_t s2[1] = {2};
    FT_CHECK_EQUAL(mx, 1, s2, want_max, "max of a transposed view");
    CHECK_STATUS(cml_backward(mx, NULL), CML_ERR_SHAPE, "grad_root may be NULL only");
    cml_tensor *ones = cml_tensor_ones(1, s2, CML_F32, CML_DEVICE_CPU);
    CHECK_OK(cml_backward(mx, ones));
    /* grad w.r.t. the base (4, 2): v[0][0] = base[0][0], v[1][2] = base[2][1] */
    const double want_base[8] = {1, 0, 0, 0, 0, 1, 0, 0};
    FT_CHECK_EQUAL(cml_tensor_grad(base), 2, s42, want_base, "max tie gradient through a transpose");
    FT_RELEASE(base, v, mx, ones);
}

/* argmax: i64 indices of the first maximum. */
static void test_argmax(void) {
    const float xv[12] = {1, 3, 3, 2, 5, 5, 0, 5, 0, 0, 0, 0};
    int64_t s34[2] = {3, 4};
    cml_tensor *x = ft_from(2, s34, xv);
    cml_tensor *a1 = cml_argmax(x, 1, false), *a0 = cml_argmax(x, 0, true), *an = cml_argmax(x, -1, true);
    const double w1[3] = {1, 0, 0}, w0[4] = {1, 1, 0, 1};
    int64_t s3[1] = {3}, s14[2] = {1, 4}, s31[2] = {3, 1};
    FT_CHECK_EQUAL(a1, 1, s3, w1, "argmax dim 1");
    FT_CHECK_EQUAL(a0, 2, s14, w0, "argmax dim 0 keepdim");
    FT_CHECK_EQUAL(an, 2, s31, w1, "argmax dim -1 keepdim");
    if (a1) CHECK(cml_tensor_dtype(a1) == CML_I64);
    FT_RELEASE(a1, a0, an);

    /* Random inputs with many ties, on contiguous and non-contiguous 3-d views. */
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 13);
    int64_t shape[3] = {3, 5, 4};
    for (int l = 0; l < FT_LAYOUT_COUNT; l++) {
        cml_tensor *t = ft_make(3, shape, (ft_layout_kind)l, FT_GRID(0, 3, 1), &rng);
        double *v = ft_read(t);
        for (int dim = 0; dim < 3; dim++) {
            int64_t oshape[2];
            int on = 0;
            for (int d = 0; d < 3; d++)
                if (d != dim) oshape[on++] = shape[d];
            double *ref = ft_malloc(sizeof(double) * (size_t)ft_numel(2, oshape));
            int64_t o = 0;
            int64_t idx[3];
            for (idx[0] = 0; idx[0] < (dim == 0 ? 1 : shape[0]); idx[0]++)
                for (idx[1] = 0; idx[1] < (dim == 1 ? 1 : shape[1]); idx[1]++)
                    for (idx[2] = 0; idx[2] < (dim == 2 ? 1 : shape[2]); idx[2]++) {
                        int64_t best = 0;
                        double bv = -INFINITY;
                        for (int64_t k = 0; k < shape[dim]; k++) {
                            int64_t j[3] = {idx[0], idx[1], idx[2]};
                            j[dim] = k;
                            double val = v[(j[0] * shape[1] + j[1]) * shape[2] + j[2]];
                            if (val > bv) {
                                bv = val;
                                best = k;
                            }
                        }
                        ref[o++] = (double)best;
                    }
            cml_tensor *am = cml_argmax(t, dim, false);
            char what[64];
            snprintf(what, sizeof what, "argmax dim %d %s", dim, ft_layout_name[l]);
            FT_CHECK_EQUAL(am, 2, oshape, ref, what);
            free(ref);
            cml_tensor_release(am);
        }
        free(v);
        cml_tensor_release(t);
    }
    /* integer inputs */
    const int32_t iv[6] = {1, 5, 5, 7, 2, 7};
    int64_t s23[2] = {2, 3}, s2[1] = {2};
    cml_tensor *xi = cml_tensor_from_host(iv, 2, s23, CML_I32, CML_DEVICE_CPU);
    cml_tensor *ai = cml_argmax(xi, 1, false);
    const double wi[2] = {1, 0}; /* rows {1, 5, 5} and {7, 2, 7}: the first maximum */
    FT_CHECK_EQUAL(ai, 1, s2, wi, "argmax of i32");
    FT_RELEASE(xi, ai);
    cml_clear_error();
    CHECK(cml_argmax(x, 2, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "dims[0]=2 out of range");
    cml_tensor_release(x);
}

static void test_reduce_records(void) {
    int64_t shape[2] = {2, 3};
    cml_tensor *x = cml_tensor_ones(2, shape, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(x, true);
    static const char *const names[R_OP_COUNT] = {"sum", "mean", "max", "min", "var", "var"};
    for (int op = 0; op < R_OP_COUNT; op++) {
        cml_tensor *y = reduce_apply(op, x, NULL, 0, false);
        CHECK(y && cml_tensor_ndim(y) == 0 && cml_tensor_grad_fn_name(y) &&
              strcmp(cml_tensor_grad_fn_name(y), names[op]) == 0);
        cml_tensor_release(y);
    }
    cml_tensor *am = cml_argmax(x, 0, false);
    CHECK(am && !cml_tensor_requires_grad(am));
    FT_RELEASE(x, am);
}

static void test_reduce_errors(void) {
    int64_t shape[3] = {2, 1, 3};
    cml_tensor *x = cml_tensor_ones(3, shape, CML_F32, CML_DEVICE_CPU);
    cml_tensor *xi = cml_tensor_ones(3, shape, CML_I64, CML_DEVICE_CPU);
    int d3 = 3, dup[2] = {0, -3}, d1 = 1;
    cml_clear_error();
    CHECK(cml_sum(x, &d3, 1, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_sum: dims[0]=3 out of range");
    cml_clear_error();
    CHECK(cml_mean(x, dup, 2, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "listed twice");
    cml_clear_error();
    CHECK(cml_max(x, NULL, 2, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "n_dims=2");
    cml_clear_error();
    CHECK(cml_var(x, &d1, 1, 1, false) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "degrees of freedom");
    cml_clear_error();
    CHECK(cml_var(x, NULL, 0, -1, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "correction=-1");
    cml_clear_error();
    CHECK(cml_sum(xi, NULL, 0, false) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_sum: x has dtype i64");
    cml_clear_error();
    CHECK(cml_min(NULL, NULL, 0, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_min: input 0 is NULL");
    FT_RELEASE(x, xi);
}

/* Empty reduced blocks: a sum is 0 (NumPy); mean/max/argmax have no value. */
static void test_empty_reductions(void) {
    int64_t shape[3] = {2, 0, 3}, s23[2] = {2, 3}, s03[2] = {0, 3};
    cml_tensor *x = cml_tensor_ones(3, shape, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(x, true);
    int d1 = 1, d0 = 0;
    cml_tensor *s1 = cml_sum(x, &d1, 1, false), *sa = cml_sum(x, NULL, 0, false), *s0 = cml_sum(x, &d0, 1, false);
    const double zeros[6] = {0};
    FT_CHECK_EQUAL(s1, 2, s23, zeros, "sum over an empty dim");
    FT_CHECK_EQUAL(sa, 0, NULL, zeros, "sum of an empty tensor");
    FT_CHECK_EQUAL(s0, 2, s03, zeros, "sum over a dim of an empty tensor");
    cml_tensor *g = cml_tensor_ones(2, s23, CML_F32, CML_DEVICE_CPU);
    CHECK_OK(cml_backward(s1, g));
    CHECK(cml_tensor_grad(x) && cml_tensor_numel(cml_tensor_grad(x)) == 0 && cml_tensor_size(cml_tensor_grad(x), 2) == 3);
    cml_clear_error();
    CHECK(cml_mean(x, &d1, 1, false) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_mean: cannot reduce over an empty dim");
    cml_clear_error();
    CHECK(cml_max(x, NULL, 0, false) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_max: cannot reduce over an empty dim");
    cml_clear_error();
    CHECK(cml_argmax(x, 1, false) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "empty");
    /* reducing the non-empty dim of an empty tensor is fine for every op */
    int d2 = 2;
    cml_tensor *m = cml_max(x, &d2, 1, true), *am = cml_argmax(x, 2, false);
    CHECK(m && cml_tensor_numel(m) == 0 && cml_tensor_ndim(m) == 3);
    CHECK(am && cml_tensor_numel(am) == 0 && cml_tensor_ndim(am) == 2);
    FT_RELEASE(x, s1, sa, s0, g, m, am);
}

int main(void) {
    RUN(test_reduce_forward);
    RUN(test_sum_large);
    RUN(test_reduce_gradients);
    RUN(test_extremum_ties);
    RUN(test_argmax);
    RUN(test_reduce_records);
    RUN(test_reduce_errors);
    RUN(test_empty_reductions);
    return th_finish();
}
