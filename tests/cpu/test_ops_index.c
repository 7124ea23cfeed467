/* Joining, indexing and selection (concat, index_select, gather, where,
 * masked_fill) and dropout: forward against references built here, on
 * contiguous and non-contiguous inputs with broadcasting, gradients by finite
 * differences, and the error paths. */
#include "framework_test_util.h"

/* ---- concat ---------------------------------------------------------------------- */

/* float64 reference of concatenating n tensors along dim. */
static double *concat_reference(cml_tensor *const *ts, int n, int dim, int64_t *oshape) {
    int nd = cml_tensor_ndim(ts[0]);
    memcpy(oshape, cml_tensor_shape(ts[0]), sizeof(int64_t) * (size_t)nd);
    oshape[dim] = 0;
    for (int i = 0; i < n; i++) oshape[dim] += cml_tensor_shape(ts[i])[dim];
    double *out = ft_malloc(sizeof(double) * (size_t)ft_numel(nd, oshape));
    int64_t idx[CML_MAX_DIMS] = {0};
    int64_t total = ft_numel(nd, oshape);
    double *vals[8];
    for (int i = 0; i < n; i++) vals[i] = ft_read(ts[i]);
    for (int64_t k = 0; k < total; k++) {
        int64_t pos = idx[dim];
        int which = 0;
        while (pos >= cml_tensor_shape(ts[which])[dim]) pos -= cml_tensor_shape(ts[which++])[dim];
        int64_t local[CML_MAX_DIMS];
        memcpy(local, idx, sizeof local);
        local[dim] = pos;
        out[k] = vals[which][ft_bcast(nd, local, nd, cml_tensor_shape(ts[which]))];
        ft_next(nd, oshape, idx);
    }
    for (int i = 0; i < n; i++) free(vals[i]);
    return out;
}

static void test_concat_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 40);
    /* three inputs differing along the middle dim, in three layouts */
    int64_t s0[3] = {2, 3, 4}, s1[3] = {2, 1, 4}, s2[3] = {2, 5, 4};
    for (int rot = 0; rot < FT_LAYOUT_COUNT; rot++) {
        cml_tensor *ts[3] = {ft_make(3, s0, (ft_layout_kind)rot, FT_UNIFORM(-1, 1), &rng),
                             ft_make(3, s1, (ft_layout_kind)((rot + 1) % 3), FT_UNIFORM(-1, 1), &rng),
                             ft_make(3, s2, (ft_layout_kind)((rot + 2) % 3), FT_UNIFORM(-1, 1), &rng)};
        int64_t oshape[CML_MAX_DIMS];
        double *ref = concat_reference(ts, 3, 1, oshape);
        cml_tensor *y = cml_concat(ts, 3, 1), *yn = cml_concat(ts, 3, -2);
        FT_CHECK_EQUAL(y, 3, oshape, ref, "concat dim 1");
        FT_CHECK_EQUAL(yn, 3, oshape, ref, "concat dim -2");
        if (y) CHECK(cml_tensor_is_contiguous(y));
        free(ref);
        FT_RELEASE(ts[0], ts[1], ts[2], y, yn);
    }
    /* an empty input in the middle */
    int64_t se[3] = {2, 0, 4};
    cml_tensor *e3[3] = {ft_make(3, s0, FT_CONTIG, FT_UNIFORM(-1, 1), &rng), cml_tensor_zeros(3, se, CML_F32, CML_DEVICE_CPU),
                         ft_make(3, s1, FT_PERMUTED, FT_UNIFORM(-1, 1), &rng)};
    int64_t eshape[CML_MAX_DIMS];
    double *eref = concat_reference(e3, 3, 1, eshape);
    cml_tensor *ey = cml_concat(e3, 3, 1);
    FT_CHECK_EQUAL(ey, 3, eshape, eref, "concat with an empty input");
    free(eref);
    FT_RELEASE(e3[0], e3[1], e3[2], ey);
    /* first and last dims, and one input */
    int64_t a[2] = {2, 3}, b[2] = {4, 3}, c[2] = {2, 5};
    cml_tensor *ta = ft_make(2, a, FT_PERMUTED, FT_UNIFORM(-1, 1), &rng);
    cml_tensor *tb = ft_make(2, b, FT_STRIDED, FT_UNIFORM(-1, 1), &rng);
    cml_tensor *tc = ft_make(2, c, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
    cml_tensor *ab[2] = {ta, tb}, *ac[2] = {ta, tc};
    int64_t oshape[CML_MAX_DIMS];
    double *r0 = concat_reference(ab, 2, 0, oshape);
    cml_tensor *y0 = cml_concat(ab, 2, 0);
    FT_CHECK_EQUAL(y0, 2, oshape, r0, "concat dim 0");
    double *r1 = concat_reference(ac, 2, 1, oshape);
    cml_tensor *y1 = cml_concat(ac, 2, -1);
    FT_CHECK_EQUAL(y1, 2, oshape, r1, "concat dim -1");
    double *r2 = concat_reference(ab, 1, 0, oshape);
    cml_tensor *y2 = cml_concat(ab, 1, 0);
    FT_CHECK_EQUAL(y2, 2, oshape, r2, "concat of one tensor");
    free(r0);
    free(r1);
    free(r2);
    FT_RELEASE(ta, tb, tc, y0, y1, y2);
}

static cml_tensor *concat_gc_fn(cml_tensor *const *in, int n, void *user) {
    cml_tensor *v = cml_transpose(in[1], 0, 2); /* stored (4, 1, 2): a view as the middle input */
    cml_tensor *ts[3] = {in[0], v, in[2]};
    cml_tensor *y = cml_concat(ts, 3, 1);
    cml_tensor_release(v);
    return y;
}

static void test_concat_gradients(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 41);
    int64_t s0[3] = {2, 3, 4}, s1[3] = {4, 1, 2}, s2[3] = {2, 5, 4};
    for (int v = 0; v < 2; v++) {
        cml_tensor *in[3] = {ft_leaf(3, s0, FT_UNIFORM(-1, 1), &rng), ft_leaf(3, s1, FT_UNIFORM(-1, 1), &rng),
                             ft_leaf(3, s2, FT_UNIFORM(-1, 1), &rng)};
        if (v) cml_tensor_set_requires_grad(in[1], false);
        FT_GRADCHECK(concat_gc_fn, in, 3, NULL, v ? "concat, middle input constant" : "concat");
        if (v) CHECK(cml_tensor_grad(in[1]) == NULL);
        FT_RELEASE(in[0], in[1], in[2]);
    }
}

static void test_concat_errors(void) {
    int64_t a[2] = {2, 3}, b[2] = {3, 4}, c[1] = {3};
    cml_tensor *ta = cml_tensor_ones(2, a, CML_F32, CML_DEVICE_CPU), *tb = cml_tensor_ones(2, b, CML_F32, CML_DEVICE_CPU);
    cml_tensor *tc = cml_tensor_ones(1, c, CML_F32, CML_DEVICE_CPU), *th = cml_tensor_ones(2, a, CML_F16, CML_DEVICE_CPU);
    cml_tensor *ab[2] = {ta, tb}, *ac[2] = {ta, tc}, *ah[2] = {ta, th}, *an[2] = {ta, NULL};
    cml_clear_error();
    CHECK(cml_concat(ab, 0, 0) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "n >= 1");
    cml_clear_error();
    CHECK(cml_concat(NULL, 2, 0) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_concat");
    cml_clear_error();
    CHECK(cml_concat(ab, 2, 1) == NULL); /* dim 0 differs */
    CHECK_ERROR(CML_ERR_SHAPE, "tensor 1 (f32 [3, 4]) does not match tensor 0 (f32 [2, 3])");
    cml_clear_error();
    CHECK(cml_concat(ac, 2, 0) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "tensor 1");
    cml_clear_error();
    CHECK(cml_concat(ah, 2, 0) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_concat: tensor 1 has dtype f16; tensor 0 has f32");
    cml_clear_error();
    CHECK(cml_concat(ab, 2, 2) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "dim=2 out of range");
    cml_clear_error();
    CHECK(cml_concat(an, 2, 0) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "input 1 is NULL");
    FT_RELEASE(ta, tb, tc, th);
}

/* ---- index_select / gather ------------------------------------------------------------- */

static void test_index_select(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 42);
    int64_t shape[3] = {4, 5, 3};
    const int64_t idx_vals[5] = {2, 0, 2, 1, 2}; /* repeats: the backward must accumulate */
    for (int l = 0; l < FT_LAYOUT_COUNT; l++) {
        cml_tensor *x = ft_make(3, shape, (ft_layout_kind)l, FT_UNIFORM(-1, 1), &rng);
        double *v = ft_read(x);
        for (int dim = 0; dim < 3; dim++) {
            for (int i32 = 0; i32 < 2; i32++) {
                int64_t n_idx = 5, is[1] = {n_idx};
                cml_tensor *i64 = ft_from_i64(1, is, idx_vals);
                cml_tensor *index = cml_to_dtype(i64, i32 ? CML_I32 : CML_I64);
                int64_t oshape[3] = {shape[0], shape[1], shape[2]};
                oshape[dim] = n_idx;
                double *ref = ft_malloc(sizeof(double) * (size_t)ft_numel(3, oshape));
                int64_t o[3] = {0, 0, 0};
                for (int64_t k = 0; k < ft_numel(3, oshape); k++) {
                    int64_t src[3] = {o[0], o[1], o[2]};
                    src[dim] = idx_vals[o[dim]];
                    ref[k] = v[ft_bcast(3, src, 3, shape)];
                    ft_next(3, oshape, o);
                }
                cml_tensor *y = cml_index_select(x, dim - 3 * (i32 && dim == 2), index);
                char what[96];
                snprintf(what, sizeof what, "index_select dim %d %s %s", dim, ft_layout_name[l], i32 ? "i32" : "i64");
                FT_CHECK_EQUAL(y, 3, oshape, ref, what);
                free(ref);
                FT_RELEASE(i64, index, y);
            }
        }
        free(v);
        cml_tensor_release(x);
    }
    /* an empty index */
    int64_t s0[1] = {0};
    cml_tensor *x = cml_tensor_ones(3, shape, CML_F32, CML_DEVICE_CPU);
    cml_tensor *e = cml_tensor_zeros(1, s0, CML_I64, CML_DEVICE_CPU);
    cml_tensor *y = cml_index_select(x, 1, e);
    CHECK(y && cml_tensor_ndim(y) == 3 && cml_tensor_size(y, 1) == 0 && cml_tensor_size(y, 2) == 3);
    FT_RELEASE(x, e, y);
}

typedef struct select_gc {
    int dim;
    cml_tensor *index;
    bool gather;
} select_gc;

static cml_tensor *select_gc_fn(cml_tensor *const *in, int n, void *user) {
    const select_gc *u = user;
    return u->gather ? cml_gather(in[0], u->dim, u->index) : cml_index_select(in[0], u->dim, u->index);
}

static void test_gather(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 43);
    int64_t shape[3] = {3, 4, 5};
    for (int l = 0; l < FT_LAYOUT_COUNT; l++) {
        cml_tensor *x = ft_make(3, shape, (ft_layout_kind)l, FT_UNIFORM(-1, 1), &rng);
        double *v = ft_read(x);
        for (int dim = 0; dim < 3; dim++) {
            int64_t ishape[3] = {shape[0], shape[1], shape[2]};
            ishape[dim] = dim == 1 ? 6 : 2; /* more and fewer picks than the source dim */
            int64_t ni = ft_numel(3, ishape);
            int64_t *iv = ft_malloc(sizeof(int64_t) * (size_t)ni);
            for (int64_t k = 0; k < ni; k++) iv[k] = (int64_t)cml_rng_below(&rng, (uint32_t)shape[dim]);
            cml_tensor *index = ft_from_i64(3, ishape, iv);
            double *ref = ft_malloc(sizeof(double) * (size_t)ni);
            int64_t o[3] = {0, 0, 0};
            for (int64_t k = 0; k < ni; k++) {
                int64_t src[3] = {o[0], o[1], o[2]};
                src[dim] = iv[k];
                ref[k] = v[ft_bcast(3, src, 3, shape)];
                ft_next(3, ishape, o);
            }
            cml_tensor *y = cml_gather(x, dim, index);
            char what[96];
            snprintf(what, sizeof what, "gather dim %d %s", dim, ft_layout_name[l]);
            FT_CHECK_EQUAL(y, 3, ishape, ref, what);
            /* a transposed (non-contiguous) index gives the same result */
            cml_tensor *it = cml_transpose(index, 0, 2);
            cml_tensor *itc = cml_contiguous(it);
            cml_tensor *itt = cml_transpose(itc, 0, 2);
            cml_tensor *y2 = cml_gather(x, dim, itt);
            FT_CHECK_EQUAL(y2, 3, ishape, ref, "gather with a non-contiguous index");
            free(ref);
            free(iv);
            FT_RELEASE(index, y, it, itc, itt, y2);
        }
        free(v);
        cml_tensor_release(x);
    }
}

static void test_select_gradients(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 44);
    int64_t shape[3] = {3, 4, 5};
    for (int dim = 0; dim < 3; dim++) {
        /* index_select with repeated entries */
        const int64_t iv[6] = {1, 0, 1, 1, 2, 0};
        int64_t is[1] = {6};
        cml_tensor *index = ft_from_i64(1, is, iv);
        select_gc u = {dim, index, false};
        cml_tensor *x = ft_leaf(3, shape, FT_UNIFORM(-1, 1), &rng);
        char what[64];
        snprintf(what, sizeof what, "index_select dim %d", dim);
        FT_GRADCHECK(select_gc_fn, &x, 1, &u, what);
        FT_RELEASE(index, x);
        /* gather with random (repeating) indices */
        int64_t ishape[3] = {3, 4, 5};
        ishape[dim] = 7;
        int64_t ni = ft_numel(3, ishape);
        int64_t *gv = ft_malloc(sizeof(int64_t) * (size_t)ni);
        for (int64_t k = 0; k < ni; k++) gv[k] = (int64_t)cml_rng_below(&rng, (uint32_t)shape[dim]);
        cml_tensor *gi = ft_from_i64(3, ishape, gv);
        select_gc ug = {dim, gi, true};
        cml_tensor *xg = ft_leaf(3, shape, FT_UNIFORM(-1, 1), &rng);
        snprintf(what, sizeof what, "gather dim %d", dim);
        FT_GRADCHECK(select_gc_fn, &xg, 1, &ug, what);
        free(gv);
        FT_RELEASE(gi, xg);
    }
}

static void test_select_errors(void) {
    int64_t shape[2] = {3, 4}, s2[2] = {2, 2}, s1[1] = {2};
    cml_tensor *x = cml_tensor_ones(2, shape, CML_F32, CML_DEVICE_CPU);
    cml_tensor *i2 = cml_tensor_zeros(2, s2, CML_I64, CML_DEVICE_CPU);
    cml_tensor *fi = cml_tensor_zeros(1, s1, CML_F32, CML_DEVICE_CPU);
    const int64_t bad[2] = {0, 3}, neg[2] = {-1, 0};
    cml_tensor *ib = ft_from_i64(1, s1, bad), *in = ft_from_i64(1, s1, neg);
    cml_clear_error();
    CHECK(cml_index_select(x, 0, i2) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "index must be 1-d");
    cml_clear_error();
    CHECK(cml_index_select(x, 0, fi) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "index has dtype f32");
    cml_clear_error();
    CHECK(cml_index_select(x, 2, ib) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "dim=2 out of range");
    cml_clear_error();
    CHECK(cml_index_select(x, 0, ib) == NULL); /* 3 is out of range for a dim of 3 */
    CHECK(cml_last_status() != CML_OK);
    cml_clear_error();
    CHECK(cml_index_select(x, 1, in) == NULL);
    CHECK(cml_last_status() != CML_OK);
    cml_clear_error();
    CHECK(cml_gather(x, 0, ib) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "must have x's shape [3, 4] except along dim 0");
    int64_t gs[2] = {1, 4};
    const int64_t gbad[4] = {0, 3, 1, 2};
    cml_tensor *gb = ft_from_i64(2, gs, gbad);
    cml_clear_error();
    CHECK(cml_gather(x, 0, gb) == NULL);
    CHECK(cml_last_status() != CML_OK);
    cml_clear_error();
    CHECK(cml_gather(NULL, 0, gb) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_gather: input 0 is NULL");
    FT_RELEASE(x, i2, fi, ib, in, gb);
}

/* ---- where / masked_fill ---------------------------------------------------------------- */

static void test_where(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 45);
    int64_t sc[2] = {3, 1}, sa[2] = {3, 4}, sb[1] = {4}, so[2] = {3, 4};
    const uint8_t cv[3] = {1, 0, 1};
    const float cf[3] = {2.5f, 0.0f, -1.0f};
    const int64_t ci[3] = {0, 7, -2};
    cml_tensor *conds[3] = {cml_tensor_from_host(cv, 2, sc, CML_U8, CML_DEVICE_CPU), ft_from(2, sc, cf),
                            ft_from_i64(2, sc, ci)};
    const bool truth[3][3] = {{true, false, true}, {true, false, true}, {false, true, true}};
    for (int c = 0; c < 3; c++) {
        for (int l = 0; l < FT_LAYOUT_COUNT; l++) {
            cml_tensor *a = ft_make(2, sa, (ft_layout_kind)l, FT_UNIFORM(-1, 1), &rng);
            cml_tensor *b = ft_make(1, sb, FT_STRIDED, FT_UNIFORM(-1, 1), &rng);
            double *va = ft_read(a), *vb = ft_read(b), ref[12];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 4; j++) ref[i * 4 + j] = truth[c][i] ? va[i * 4 + j] : vb[j];
            cml_tensor *y = cml_where(conds[c], a, b);
            char what[64];
            snprintf(what, sizeof what, "where cond %d %s", c, ft_layout_name[l]);
            FT_CHECK_EQUAL(y, 2, so, ref, what);
            free(va);
            free(vb);
            FT_RELEASE(a, b, y);
        }
    }
    FT_RELEASE(conds[0], conds[1], conds[2]);
}

typedef struct where_gc {
    cml_tensor *cond;
    double fill;
    bool masked_fill;
} where_gc;

static cml_tensor *where_gc_fn(cml_tensor *const *in, int n, void *user) {
    const where_gc *u = user;
    if (u->masked_fill) return cml_masked_fill(in[0], u->cond, u->fill);
    return cml_where(u->cond, in[0], in[1]);
}

static void test_where_gradients(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 46);
    int64_t sc[3] = {2, 1, 4}, sa[2] = {3, 1}, sb[3] = {1, 3, 4};
    int64_t nc = ft_numel(3, sc);
    uint8_t cv[8];
    for (int64_t i = 0; i < nc; i++) cv[i] = (uint8_t)(cml_rng_u32(&rng) & 1u);
    cml_tensor *cond = cml_tensor_from_host(cv, 3, sc, CML_U8, CML_DEVICE_CPU);
    where_gc u = {cond, 0, false};
    cml_tensor *in[2] = {ft_leaf(2, sa, FT_UNIFORM(-1, 1), &rng), ft_leaf(3, sb, FT_UNIFORM(-1, 1), &rng)};
    FT_GRADCHECK(where_gc_fn, in, 2, &u, "where with a broadcast cond, a and b");
    FT_RELEASE(in[0], in[1]);
    /* masked_fill: the filled positions get no gradient */
    int64_t sx[3] = {2, 3, 4}, sm[2] = {3, 1};
    const uint8_t mv[3] = {0, 1, 0};
    cml_tensor *mask = cml_tensor_from_host(mv, 2, sm, CML_U8, CML_DEVICE_CPU);
    where_gc um = {mask, -7.5, true};
    cml_tensor *x = ft_leaf(3, sx, FT_UNIFORM(-1, 1), &rng);
    FT_GRADCHECK(where_gc_fn, &x, 1, &um, "masked_fill");
    FT_RELEASE(cond, mask, x);
}

static void test_masked_fill(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 47);
    int64_t sx[3] = {2, 3, 4}, sm[2] = {3, 1}, big[3] = {5, 3, 4};
    const uint8_t mv[3] = {0, 1, 0};
    cml_tensor *mask = cml_tensor_from_host(mv, 2, sm, CML_U8, CML_DEVICE_CPU);
    for (int l = 0; l < FT_LAYOUT_COUNT; l++) {
        cml_tensor *x = ft_make(3, sx, (ft_layout_kind)l, FT_UNIFORM(-1, 1), &rng);
        double *ref = ft_read(x);
        for (int64_t k = 0; k < 24; k++)
            if (mv[(k / 4) % 3]) ref[k] = -7.5;
        cml_tensor *y = cml_masked_fill(x, mask, -7.5);
        FT_CHECK_EQUAL(y, 3, sx, ref, ft_layout_name[l]);
        free(ref);
        FT_RELEASE(x, y);
    }
    /* a mask that would broadcast x to a bigger shape */
    cml_tensor *x = cml_tensor_ones(2, sm, CML_F32, CML_DEVICE_CPU);
    cml_tensor *mb = cml_tensor_zeros(3, big, CML_U8, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_masked_fill(x, mb, 1.0) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_masked_fill: mask must broadcast to x's shape");
    FT_RELEASE(mask, x, mb);
}

static void test_where_errors(void) {
    int64_t s[2] = {2, 3}, s4[1] = {4};
    cml_tensor *c = cml_tensor_ones(2, s, CML_U8, CML_DEVICE_CPU), *a = cml_tensor_ones(2, s, CML_F32, CML_DEVICE_CPU);
    cml_tensor *h = cml_tensor_ones(2, s, CML_F16, CML_DEVICE_CPU), *b4 = cml_tensor_ones(1, s4, CML_F32, CML_DEVICE_CPU);
    cml_tensor *c4 = cml_tensor_ones(1, s4, CML_U8, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_where(c, a, h) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_where: a and b dtypes differ (f32 and f16)");
    cml_clear_error();
    CHECK(cml_where(c, a, b4) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "do not broadcast");
    cml_clear_error();
    CHECK(cml_where(c4, a, a) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_where");
    cml_clear_error();
    CHECK(cml_where(NULL, a, a) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_where: input 0 is NULL");
    FT_RELEASE(c, a, h, b4, c4);
}

/* ---- dropout ---------------------------------------------------------------------------- */

static void test_dropout_mask(void) {
    const float p = 0.3f;
    int64_t shape[2] = {100, 200};
    int64_t n = 20000;
    cml_tensor *x = cml_tensor_ones(2, shape, CML_F32, CML_DEVICE_CPU);
    cml_rng r1, r2;
    cml_rng_init(&r1, 1234);
    cml_rng_init(&r2, 1234);
    cml_tensor *y1 = cml_dropout(x, p, true, &r1), *y2 = cml_dropout(x, p, true, &r2);
    cml_tensor *y3 = cml_dropout(x, p, true, &r1); /* the generator advanced: another mask */
    CHECK_NOT_NULL(y1);
    CHECK_NOT_NULL(y2);
    CHECK_NOT_NULL(y3);
    if (y1 && y2 && y3) {
        double *v1 = ft_read(y1), *v2 = ft_read(y2), *v3 = ft_read(y3);
        int64_t zeros = 0, bad_scale = 0, diff12 = 0, diff13 = 0;
        for (int64_t i = 0; i < n; i++) {
            if (v1[i] == 0) zeros++;
            else if (fabs(v1[i] - 1.0 / (1.0 - p)) > 1e-6) bad_scale++;
            diff12 += v1[i] != v2[i];
            diff13 += v1[i] != v3[i];
        }
        double rate = (double)zeros / (double)n; /* binomial: sd = 0.0032 */
        CHECK_MSG(fabs(rate - p) < 0.015, "drop rate %.4f, expected ~%.2f", rate, (double)p);
        CHECK_MSG(bad_scale == 0, "%lld kept elements are not scaled by 1/(1-p)", (long long)bad_scale);
        CHECK_MSG(diff12 == 0, "the same seed gave %lld different elements", (long long)diff12);
        CHECK_MSG(diff13 > n / 10, "consecutive masks differ in only %lld elements", (long long)diff13);
        free(v1);
        free(v2);
        free(v3);
    }
    FT_RELEASE(x, y1, y2, y3);
}

static void test_dropout_values_and_gradient(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 48);
    const float p = 0.5f;
    int64_t shape[3] = {4, 6, 5};
    for (int l = 0; l < FT_LAYOUT_COUNT; l++) {
        cml_tensor *x = ft_make(3, shape, (ft_layout_kind)l, FT_AWAY_FROM_ZERO(0.5, 2), &rng);
        cml_tensor_set_requires_grad(x, true); /* a non-contiguous view needing a gradient: it just records */
        cml_tensor *y = cml_dropout(x, p, true, &rng);
        CHECK_NOT_NULL(y);
        if (!y) {
            cml_tensor_release(x);
            continue;
        }
        CHECK(cml_tensor_grad_fn_name(y) && strcmp(cml_tensor_grad_fn_name(y), "dropout") == 0);
        double *vx = ft_read(x), *vy = ft_read(y);
        int64_t n = ft_numel(3, shape), bad = 0;
        double *want_grad = ft_malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            bool kept = vy[i] != 0;
            if (kept && fabs(vy[i] - vx[i] / (1.0 - p)) > 1e-6) bad++;
            want_grad[i] = kept ? 1.0 / (1.0 - p) : 0.0;
        }
        CHECK_MSG(bad == 0, "%lld kept values are not x/(1-p)", (long long)bad);
        cml_tensor *ones = cml_tensor_ones(3, shape, CML_F32, CML_DEVICE_CPU);
        CHECK_OK(cml_backward(y, ones));
        FT_CHECK_CLOSE(cml_tensor_grad(x), 3, shape, want_grad, 1e-7, "dropout gradient = mask / (1 - p)");
        free(vx);
        free(vy);
        free(want_grad);
        FT_RELEASE(x, y, ones);
    }
}

/* Finite differences need the same mask at every evaluation: f re-seeds its generator. */
static cml_tensor *dropout_gc_fn(cml_tensor *const *in, int n, void *user) {
    cml_rng rng;
    cml_rng_init(&rng, 99);
    cml_tensor *v = cml_transpose(in[0], 0, 1);
    cml_tensor *y = cml_dropout(v, 0.25f, true, &rng);
    cml_tensor_release(v);
    return y;
}

static void test_dropout_gradcheck(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 49);
    int64_t shape[2] = {6, 7};
    cml_tensor *x = ft_leaf(2, shape, FT_UNIFORM(-1, 1), &rng);
    FT_GRADCHECK(dropout_gc_fn, &x, 1, NULL, "dropout");
    cml_tensor_release(x);
}

static void test_dropout_identity_and_errors(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 50);
    int64_t shape[2] = {3, 4};
    cml_tensor *x = ft_make(2, shape, FT_PERMUTED, FT_UNIFORM(-1, 1), &rng);
    double *ref = ft_read(x);
    cml_rng before = rng;
    cml_tensor *e = cml_dropout(x, 0.5f, false, &rng), *z = cml_dropout(x, 0.0f, true, &rng);
    cml_tensor *nr = cml_dropout(x, 0.5f, false, NULL); /* evaluation needs no generator */
    FT_CHECK_EQUAL(e, 2, shape, ref, "dropout in evaluation mode");
    FT_CHECK_EQUAL(z, 2, shape, ref, "dropout with p = 0");
    FT_CHECK_EQUAL(nr, 2, shape, ref, "dropout in evaluation mode without rng");
    CHECK(rng.offset == before.offset); /* nothing drawn */
    free(ref);
    cml_tensor *xi = cml_tensor_ones(2, shape, CML_I32, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_dropout(x, 1.0f, true, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_dropout: p=1 must be in [0, 1)");
    cml_clear_error();
    CHECK(cml_dropout(x, -0.1f, true, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "p=-0.1");
    cml_clear_error();
    CHECK(cml_dropout(x, NAN, true, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "must be in [0, 1)");
    cml_clear_error();
    CHECK(cml_dropout(x, 0.5f, true, NULL) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "rng must not be NULL");
    cml_clear_error();
    CHECK(cml_dropout(xi, 0.5f, true, &rng) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_dropout: x has dtype i32");
    FT_RELEASE(x, e, z, nr, xi);
}

int main(void) {
    RUN(test_concat_forward);
    RUN(test_concat_gradients);
    RUN(test_concat_errors);
    RUN(test_index_select);
    RUN(test_gather);
    RUN(test_select_gradients);
    RUN(test_select_errors);
    RUN(test_where);
    RUN(test_where_gradients);
    RUN(test_masked_fill);
    RUN(test_where_errors);
    RUN(test_dropout_mask);
    RUN(test_dropout_values_and_gradient);
    RUN(test_dropout_gradcheck);
    RUN(test_dropout_identity_and_errors);
    return th_finish();
}
