/* Tensors: creation in every dtype, host copies, properties, views and their
 * storage sharing (reshape/view, transpose/permute, slice, expand, squeeze,
 * flatten), copies (contiguous, to_dtype, clone), reference counting,
 * printing, and every bad argument's status and message. */
#include "framework_test_util.h"

static const cml_dtype all_dtypes[] = {CML_F32, CML_F16, CML_BF16, CML_F8E4M3, CML_F8E5M2, CML_I32, CML_I64, CML_U8};

static bool shares_storage(const cml_tensor *view, const cml_tensor *base) {
    /* the view's first element lies inside the base's contiguous block */
    const char *b = cml_tensor_data(base), *v = cml_tensor_data(view);
    size_t nbytes = (size_t)cml_tensor_numel(base) * cml_dtype_size(cml_tensor_dtype(base));
    return v >= b && v < b + (nbytes ? nbytes : 1);
}

/* ---- creation ---------------------------------------------------------------------- */

static void test_creation_fill(void) {
    int64_t shape[3] = {2, 1, 3};
    double vals[6];
    for (int t = 0; t < FT_LEN(all_dtypes); t++) {
        cml_dtype dt = all_dtypes[t];
        /* values every dtype represents exactly */
        double fill = dt == CML_U8 ? 200.0 : (dt == CML_F8E4M3 || dt == CML_F8E5M2) ? -2.5 : -3.5;
        if (dt == CML_I32 || dt == CML_I64) fill = -7;
        cml_tensor *z = cml_tensor_zeros(3, shape, dt, CML_DEVICE_CPU);
        cml_tensor *o = cml_tensor_ones(3, shape, dt, CML_DEVICE_CPU);
        cml_tensor *f = cml_tensor_full(3, shape, fill, dt, CML_DEVICE_CPU);
        cml_tensor *e = cml_tensor_empty(3, shape, dt, CML_DEVICE_CPU);
        cml_tensor *s = cml_tensor_scalar(fill, dt, CML_DEVICE_CPU);
        char what[64];
        snprintf(what, sizeof what, "zeros %s", cml_dtype_name(dt));
        for (int i = 0; i < 6; i++) vals[i] = 0;
        FT_CHECK_EQUAL(z, 3, shape, vals, what);
        snprintf(what, sizeof what, "ones %s", cml_dtype_name(dt));
        for (int i = 0; i < 6; i++) vals[i] = 1;
        FT_CHECK_EQUAL(o, 3, shape, vals, what);
        snprintf(what, sizeof what, "full %s", cml_dtype_name(dt));
        for (int i = 0; i < 6; i++) vals[i] = fill;
        FT_CHECK_EQUAL(f, 3, shape, vals, what);
        snprintf(what, sizeof what, "scalar %s", cml_dtype_name(dt));
        FT_CHECK_EQUAL(s, 0, NULL, vals, what);
        CHECK_NOT_NULL(e);
        if (z && e && s) {
            CHECK(cml_tensor_dtype(z) == dt && cml_tensor_ndim(z) == 3 && cml_tensor_numel(z) == 6);
            CHECK(cml_tensor_size(z, 0) == 2 && cml_tensor_size(z, -1) == 3 && cml_tensor_size(z, 3) == -1);
            CHECK(cml_tensor_stride(z, 0) == 3 && cml_tensor_stride(z, 1) == 3 && cml_tensor_stride(z, 2) == 1);
            CHECK(cml_tensor_is_contiguous(z) && cml_tensor_is_contiguous(e));
            CHECK(cml_device_equal(cml_tensor_device(z), CML_DEVICE_CPU));
            CHECK(cml_tensor_ndim(s) == 0 && cml_tensor_numel(s) == 1 && cml_tensor_item(s) == fill);
            int64_t at[3] = {1, 0, 2};
            CHECK(cml_tensor_item_at(f, at) == fill);
            CHECK(!cml_tensor_requires_grad(z) && !cml_tensor_has_grad_fn(z) && cml_tensor_grad(z) == NULL);
        }
        FT_RELEASE(z, o, f, e, s);
    }
    /* i64 values beyond float precision stay exact */
    int64_t one[1] = {2};
    cml_tensor *big = cml_tensor_full(1, one, 1099511627777.0, CML_I64, CML_DEVICE_CPU);
    const double want_big[2] = {1099511627777.0, 1099511627777.0};
    FT_CHECK_EQUAL(big, 1, one, want_big, "full i64 2^40 + 1");
    /* empty tensors */
    int64_t empty[3] = {2, 0, 3};
    cml_tensor *ez = cml_tensor_zeros(3, empty, CML_F32, CML_DEVICE_CPU);
    CHECK(ez && cml_tensor_numel(ez) == 0 && cml_tensor_size(ez, 1) == 0);
    FT_RELEASE(big, ez);
}

static void test_arange(void) {
    static const struct {
        double start, stop, step;
        cml_dtype dt;
        int n;
        double want[6];
    } cases[] = {
        {0, 5, 1, CML_F32, 5, {0, 1, 2, 3, 4}},
        {1, 2, 0.25, CML_F32, 4, {1, 1.25, 1.5, 1.75}},
        {5, 0, -2, CML_F32, 3, {5, 3, 1}},
        {0, 10, 3, CML_I64, 4, {0, 3, 6, 9}},
        {-2, 2, 1, CML_I32, 4, {-2, -1, 0, 1}},
        {0, 4, 1, CML_BF16, 4, {0, 1, 2, 3}},
        {3, 3, 1, CML_F32, 0, {0}},
        {3, 0, 1, CML_F32, 0, {0}},
        /* integers beyond float precision */
        {16777217, 16777220, 1, CML_I32, 3, {16777217, 16777218, 16777219}},
        {4503599627370497.0, 4503599627370500.0, 1, CML_I64, 3, {4503599627370497.0, 4503599627370498.0, 4503599627370499.0}},
    };
    for (int c = 0; c < FT_LEN(cases); c++) {
        cml_tensor *t = cml_tensor_arange(cases[c].start, cases[c].stop, cases[c].step, cases[c].dt, CML_DEVICE_CPU);
        int64_t n = cases[c].n;
        char what[64];
        snprintf(what, sizeof what, "arange case %d", c);
        FT_CHECK_EQUAL(t, 1, &n, cases[c].want, what);
        if (t) CHECK(cml_tensor_dtype(t) == cases[c].dt);
        cml_tensor_release(t);
    }
    cml_clear_error();
    CHECK(cml_tensor_arange(0, 1, 0, CML_F32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_tensor_arange: step=0");
    cml_clear_error();
    CHECK(cml_tensor_arange(0, INFINITY, 1, CML_F32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "finite");
}

static void test_rand(void) {
    int64_t shape[2] = {100, 100};
    cml_rng r1, r2;
    cml_rng_init(&r1, 5);
    cml_rng_init(&r2, 5);
    cml_tensor *u = cml_tensor_rand(2, shape, -2.0f, 3.0f, &r1, CML_F32, CML_DEVICE_CPU);
    cml_tensor *u2 = cml_tensor_rand(2, shape, -2.0f, 3.0f, &r2, CML_F32, CML_DEVICE_CPU);
    cml_tensor *u3 = cml_tensor_rand(2, shape, -2.0f, 3.0f, &r1, CML_F32, CML_DEVICE_CPU);
    cml_tensor *n = cml_tensor_randn(2, shape, 1.5f, 2.0f, &r1, CML_F32, CML_DEVICE_CPU);
    cml_tensor *b = cml_tensor_rand(2, shape, 0.0f, 1.0f, &r1, CML_BF16, CML_DEVICE_CPU);
    cml_tensor *h = cml_tensor_randn(2, shape, 0.0f, 1.0f, &r1, CML_F16, CML_DEVICE_CPU);
    CHECK_NOT_NULL(u);
    CHECK_NOT_NULL(u2);
    CHECK_NOT_NULL(u3);
    CHECK_NOT_NULL(n);
    CHECK_NOT_NULL(b);
    CHECK_NOT_NULL(h);
    if (u && u2 && u3 && n && b && h) {
        CHECK(cml_tensor_dtype(b) == CML_BF16 && cml_tensor_dtype(h) == CML_F16);
        double *vu = ft_read(u), *vu2 = ft_read(u2), *vu3 = ft_read(u3), *vn = ft_read(n), *vb = ft_read(b);
        double su = 0, sn = 0, sn2 = 0, sb = 0;
        int64_t out_of_range = 0, same = 0, differ = 0;
        for (int i = 0; i < 10000; i++) {
            su += vu[i];
            sn += vn[i];
            sn2 += vn[i] * vn[i];
            sb += vb[i];
            out_of_range += vu[i] < -2.0 || vu[i] >= 3.0 || vb[i] < 0 || vb[i] > 1;
            same += vu[i] == vu2[i];
            differ += vu[i] != vu3[i];
        }
        double mean_n = sn / 1e4, sd_n = sqrt(sn2 / 1e4 - mean_n * mean_n);
        CHECK_MSG(out_of_range == 0, "%lld values outside [low, high)", (long long)out_of_range);
        CHECK_NEAR(su / 1e4, 0.5, 0.05);
        CHECK_NEAR(sb / 1e4, 0.5, 0.02);
        CHECK_NEAR(mean_n, 1.5, 0.06);
        CHECK_NEAR(sd_n, 2.0, 0.06);
        CHECK_MSG(same == 10000, "the same seed gave different values (%lld same)", (long long)same);
        CHECK_MSG(differ > 9900, "the next draw repeated %lld values", (long long)(10000 - differ));
        free(vu);
        free(vu2);
        free(vu3);
        free(vn);
        free(vb);
    }
    FT_RELEASE(u, u2, u3, n, b, h);
    cml_clear_error();
    CHECK(cml_tensor_rand(2, shape, 0, 1, NULL, CML_F32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_tensor_rand: rng must not be NULL");
    cml_clear_error();
    CHECK(cml_tensor_randn(2, shape, 0, 1, &r1, CML_I32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_tensor_randn: dtype i32");
    int64_t bad[1] = {-1};
    cml_clear_error();
    CHECK(cml_tensor_rand(1, bad, 0, 1, &r1, CML_F32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "shape[0]=-1");
}

static void test_host_round_trip(void) {
    int64_t shape[2] = {3, 5};
    unsigned char src[15 * 8], dst[15 * 8 + 8];
    for (int i = 0; i < (int)sizeof src; i++) src[i] = (unsigned char)(i * 37 + 11);
    for (int t = 0; t < FT_LEN(all_dtypes); t++) {
        cml_dtype dt = all_dtypes[t];
        size_t nb = 15 * cml_dtype_size(dt);
        unsigned char buf[15 * 8];
        memcpy(buf, src, sizeof buf);
        if (dt == CML_F32 || dt == CML_F16 || dt == CML_BF16 || cml_dtype_size(dt) == 1) {
            /* avoid NaN payloads (a conversion may canonicalize them): small positive values */
            for (int i = 0; i < 15; i++) cml_dtype_store(buf, dt, i, (float)(i % 7) * 0.5f);
        }
        cml_tensor *x = cml_tensor_from_host(buf, 2, shape, dt, CML_DEVICE_CPU);
        CHECK_NOT_NULL(x);
        if (!x) continue;
        memset(dst, 0xAB, sizeof dst);
        CHECK_OK(cml_tensor_to_host(x, dst, nb));
        CHECK_MSG(memcmp(dst, buf, nb) == 0, "round trip of %s changed bytes", cml_dtype_name(dt));
        CHECK(dst[nb] == 0xAB); /* nothing written past nbytes */
        /* a transposed view comes back in row-major order of the view */
        cml_tensor *tv = cml_transpose(x, 0, 1);
        CHECK_OK(cml_tensor_to_host(tv, dst, nb));
        bool ok = true;
        size_t es = cml_dtype_size(dt);
        for (int i = 0; i < 5 && ok; i++)
            for (int j = 0; j < 3 && ok; j++) ok = memcmp(dst + (size_t)(i * 3 + j) * es, buf + (size_t)(j * 5 + i) * es, es) == 0;
        CHECK_MSG(ok, "transposed to_host of %s", cml_dtype_name(dt));
        cml_clear_error();
        CHECK(cml_tensor_to_host(x, dst, nb - 1) == CML_ERR_INVALID_ARG);
        CHECK_ERROR(CML_ERR_INVALID_ARG, "nbytes=");
        FT_RELEASE(x, tv);
    }
    cml_clear_error();
    CHECK(cml_tensor_from_host(NULL, 2, shape, CML_F32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_tensor_from_host: data must not be NULL");
    CHECK_STATUS(cml_tensor_to_host(NULL, dst, 4), CML_ERR_INVALID_ARG, "cml_tensor_to_host");
    /* 0-d */
    const float v = 4.25f;
    cml_tensor *s = cml_tensor_from_host(&v, 0, NULL, CML_F32, CML_DEVICE_CPU);
    CHECK(s && cml_tensor_item(s) == 4.25);
    cml_tensor_release(s);
}

static void test_creation_errors(void) {
    int64_t neg[2] = {2, -2}, ok[2] = {2, 2}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    cml_clear_error();
    CHECK(cml_tensor_zeros(2, neg, CML_F32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_tensor_zeros: shape[1]=-2 must be >= 0");
    cml_clear_error();
    CHECK(cml_tensor_ones(9, nine, CML_F32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_tensor_ones: ndim=9 must be in [0, 8]");
    cml_clear_error();
    CHECK(cml_tensor_empty(-1, ok, CML_F32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_tensor_empty: ndim=-1");
    cml_clear_error();
    CHECK(cml_tensor_full(2, ok, 1.0, (cml_dtype)42, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_tensor_full: invalid dtype 42");
    cml_clear_error();
    CHECK(cml_tensor_zeros(2, NULL, CML_F32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_tensor_zeros: shape must not be NULL");
    int64_t huge[2] = {INT64_MAX / 4, 8};
    cml_clear_error();
    CHECK(cml_tensor_empty(2, huge, CML_F32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_tensor_empty: shape is too large");
    const float one = 1.0f;
    cml_clear_error();
    CHECK(cml_tensor_from_host(&one, 2, neg, CML_F32, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_tensor_from_host: shape[1]=-2");
    cml_clear_error();
    CHECK(cml_tensor_from_host(&one, 0, NULL, (cml_dtype)-1, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_tensor_from_host: invalid dtype -1");
    cml_clear_error();
    CHECK(cml_tensor_scalar(1.0, (cml_dtype)8, CML_DEVICE_CPU) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_tensor_scalar: invalid dtype 8");
    cml_clear_error();
    CHECK(cml_tensor_item(NULL) != cml_tensor_item(NULL)); /* NaN */
    CHECK(cml_last_status() != CML_OK);
}

/* ---- views ------------------------------------------------------------------------------ */

static cml_tensor *iota(int ndim, const int64_t *shape) {
    cml_tensor *a = cml_tensor_arange(0, (double)ft_numel(ndim, shape), 1, CML_F32, CML_DEVICE_CPU);
    cml_tensor *r = cml_reshape(a, ndim, shape);
    cml_tensor_release(a);
    return r;
}

static double *iota_ref(int64_t n) {
    double *v = ft_malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = (double)i;
    return v;
}

static void test_reshape_and_view(void) {
    int64_t s234[3] = {2, 3, 4};
    cml_tensor *x = iota(3, s234);
    double *ref = iota_ref(24);
    /* contiguous: always a view */
    static const ft_shape targets[] = {{2, {4, -1}}, {1, {-1}}, {4, {1, 24, 1, 1}}, {3, {3, 2, 4}}, {2, {6, 4}}};
    static const ft_shape results[] = {{2, {4, 6}}, {1, {24}}, {4, {1, 24, 1, 1}}, {3, {3, 2, 4}}, {2, {6, 4}}};
    for (int i = 0; i < FT_LEN(targets); i++) {
        cml_tensor *r = cml_reshape(x, targets[i].ndim, targets[i].d);
        cml_tensor *v = cml_view(x, targets[i].ndim, targets[i].d);
        FT_CHECK_EQUAL(r, results[i].ndim, results[i].d, ref, "reshape of a contiguous tensor");
        FT_CHECK_EQUAL(v, results[i].ndim, results[i].d, ref, "view of a contiguous tensor");
        if (r && v) CHECK(cml_tensor_data(r) == cml_tensor_data(x) && cml_tensor_data(v) == cml_tensor_data(x));
        FT_RELEASE(r, v);
    }
    /* 0-d <-> 1 element */
    cml_tensor *s = cml_tensor_scalar(3.0, CML_F32, CML_DEVICE_CPU);
    int64_t s111[3] = {1, 1, 1};
    cml_tensor *s3 = cml_reshape(s, 3, s111), *s0 = cml_reshape(s3, 0, NULL);
    CHECK(s3 && s0 && cml_tensor_ndim(s0) == 0 && cml_tensor_item(s0) == 3.0);
    FT_RELEASE(s, s3, s0);

    /* a permuted tensor: splitting a dim is a view, merging permuted dims copies */
    int perm[3] = {1, 0, 2};
    cml_tensor *p = cml_permute(x, perm); /* (3, 2, 4), strides (4, 12, 1) */
    int64_t split[4] = {3, 2, 2, 2}, merge[2] = {3, 8};
    cml_tensor *ps = cml_view(p, 4, split);
    CHECK(ps && cml_tensor_data(ps) == cml_tensor_data(x) && cml_tensor_stride(ps, 2) == 2);
    double pref[24];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 4; k++) pref[(i * 2 + j) * 4 + k] = (double)((j * 3 + i) * 4 + k);
    FT_CHECK_EQUAL(ps, 4, split, pref, "view splitting a dim of a permuted tensor");
    cml_tensor *pm = cml_reshape(p, 2, merge);
    FT_CHECK_EQUAL(pm, 2, merge, pref, "reshape merging permuted dims (a copy)");
    if (pm) CHECK(!shares_storage(pm, x) && cml_tensor_is_contiguous(pm));
    cml_clear_error();
    CHECK(cml_view(p, 2, merge) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_view: the strides of this tensor do not allow a view");
    /* a row-strided slice: (3, 4) rows 0, 2, 4 of a (6, 4) */
    int64_t s64[2] = {6, 4}, s322[3] = {3, 2, 2}, s12[1] = {12};
    cml_tensor *y = iota(2, s64);
    cml_tensor *rows = cml_slice(y, 0, 0, 6, 2);
    cml_tensor *rv = cml_view(rows, 3, s322);
    double rref[12];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++) rref[i * 4 + k] = (double)(2 * i * 4 + k);
    FT_CHECK_EQUAL(rv, 3, s322, rref, "view of a row-strided slice");
    if (rv) CHECK(cml_tensor_data(rv) == cml_tensor_data(y));
    cml_clear_error();
    CHECK(cml_view(rows, 1, s12) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "do not allow a view");
    cml_tensor *rf = cml_reshape(rows, 1, s12);
    FT_CHECK_EQUAL(rf, 1, s12, rref, "reshape of a row-strided slice");
    /* size-1 dims with odd strides do not block a view */
    cml_tensor *col = cml_slice(y, 1, 2, 3, 1); /* (6, 1), strides (4, 1) */
    int64_t s6[1] = {6}, s231[3] = {2, 3, 1};
    cml_tensor *cv = cml_view(col, 1, s6), *cv2 = cml_view(col, 3, s231);
    const double cref[6] = {2, 6, 10, 14, 18, 22};
    FT_CHECK_EQUAL(cv, 1, s6, cref, "view of a column");
    FT_CHECK_EQUAL(cv2, 3, s231, cref, "view of a column as (2, 3, 1)");
    FT_RELEASE(p, ps, pm, y, rows, rv, rf, col, cv, cv2);

    /* bad shapes */
    int64_t two_infer[2] = {-1, -1}, wrong[2] = {5, 2}, noinfer[2] = {-1, 5}, negs[2] = {-2, 12};
    cml_clear_error();
    CHECK(cml_reshape(x, 2, two_infer) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_reshape: only one dim may be -1");
    cml_clear_error();
    CHECK(cml_reshape(x, 2, wrong) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_reshape: shape [5, 2] has 10 elements; the tensor [2, 3, 4] has 24");
    cml_clear_error();
    CHECK(cml_view(x, 2, noinfer) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_view: cannot infer dim 0");
    cml_clear_error();
    CHECK(cml_reshape(x, 2, negs) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "shape[0]=-2");
    cml_clear_error();
    CHECK(cml_reshape(x, 2, NULL) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_reshape: shape must not be NULL");
    cml_clear_error();
    CHECK(cml_reshape(x, 9, s234) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "ndim=9");
    free(ref);
    cml_tensor_release(x);
}

static void test_transpose_permute(void) {
    int64_t s234[3] = {2, 3, 4};
    cml_tensor *x = iota(3, s234);
    cml_tensor *t = cml_transpose(x, 0, -1); /* (4, 3, 2) */
    int perm[3] = {2, 0, 1};
    cml_tensor *p = cml_permute(x, perm); /* (4, 2, 3) */
    int64_t st[3] = {4, 3, 2}, sp[3] = {4, 2, 3};
    double tref[24], pref[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++) tref[(i * 3 + j) * 2 + k] = (double)((k * 3 + j) * 4 + i);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) pref[(i * 2 + j) * 3 + k] = (double)((j * 3 + k) * 4 + i);
    FT_CHECK_EQUAL(t, 3, st, tref, "transpose(0, -1)");
    FT_CHECK_EQUAL(p, 3, sp, pref, "permute(2, 0, 1)");
    if (t && p) {
        CHECK(cml_tensor_stride(t, 0) == 1 && cml_tensor_stride(t, 1) == 4 && cml_tensor_stride(t, 2) == 12);
        CHECK(!cml_tensor_is_contiguous(t) && cml_tensor_data(t) == cml_tensor_data(x));
        CHECK(cml_tensor_stride(p, 0) == 1 && cml_tensor_stride(p, 1) == 12 && cml_tensor_stride(p, 2) == 4);
    }
    cml_tensor *tt = cml_transpose(t, 2, 0); /* back to (2, 3, 4) */
    double *ref = iota_ref(24);
    FT_CHECK_EQUAL(tt, 3, s234, ref, "transpose twice");
    if (tt) CHECK(cml_tensor_is_contiguous(tt));
    cml_tensor *same = cml_transpose(x, 1, 1);
    FT_CHECK_EQUAL(same, 3, s234, ref, "transpose of a dim with itself");
    free(ref);
    int dup[3] = {0, 0, 1}, oob[3] = {0, 1, 3};
    cml_clear_error();
    CHECK(cml_permute(x, dup) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_permute: dims[1]=0 must be a distinct dim of a 3-d tensor");
    cml_clear_error();
    CHECK(cml_permute(x, oob) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "dims[2]=3");
    cml_clear_error();
    CHECK(cml_permute(x, NULL) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_permute: dims must not be NULL");
    cml_clear_error();
    CHECK(cml_transpose(x, 0, 3) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_transpose: dims (0, 3) out of range for a 3-d tensor");
    FT_RELEASE(x, t, p, tt, same);
}

static void test_slice(void) {
    int64_t s10[1] = {10}, s45[2] = {4, 5};
    cml_tensor *x = iota(1, s10);
    static const struct {
        int64_t start, stop, step;
        int n;
        double want[10];
    } cases[] = {
        {2, 7, 1, 5, {2, 3, 4, 5, 6}},
        {-3, 10, 1, 3, {7, 8, 9}},
        {0, -2, 3, 3, {0, 3, 6}},
        {1, 100, 4, 3, {1, 5, 9}},
        {-100, 2, 1, 2, {0, 1}},
        {5, 5, 1, 0, {0}},
        {7, 3, 1, 0, {0}},
        {12, 20, 1, 0, {0}},
        {0, 10, 10, 1, {0}},
        {-1, INT64_MAX, 1, 1, {9}},
    };
    for (int c = 0; c < FT_LEN(cases); c++) {
        cml_tensor *s = cml_slice(x, 0, cases[c].start, cases[c].stop, cases[c].step);
        int64_t n = cases[c].n;
        char what[48];
        snprintf(what, sizeof what, "slice case %d", c);
        FT_CHECK_EQUAL(s, 1, &n, cases[c].want, what);
        if (s && n > 0) CHECK(shares_storage(s, x));
        cml_tensor_release(s);
    }
    /* 2-d: columns 1, 3 of rows 1..3, then a slice of the slice */
    cml_tensor *y = iota(2, s45);
    cml_tensor *a = cml_slice(y, 0, 1, 4, 1), *b = cml_slice(a, -1, 1, 5, 2), *c = cml_slice(b, 0, 1, 3, 1);
    int64_t sb[2] = {3, 2}, sc[2] = {2, 2};
    const double wb[6] = {6, 8, 11, 13, 16, 18}, wc[4] = {11, 13, 16, 18};
    FT_CHECK_EQUAL(b, 2, sb, wb, "slice of rows then strided columns");
    FT_CHECK_EQUAL(c, 2, sc, wc, "slice of a slice");
    if (b) CHECK(cml_tensor_stride(b, 0) == 5 && cml_tensor_stride(b, 1) == 2);
    cml_clear_error();
    CHECK(cml_slice(y, 0, 0, 2, 0) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_slice: step=0 must be >= 1");
    cml_clear_error();
    CHECK(cml_slice(y, 0, 2, 0, -1) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "step=-1");
    cml_clear_error();
    CHECK(cml_slice(y, 2, 0, 1, 1) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_slice: dim=2 out of range for a 2-d tensor");
    FT_RELEASE(x, y, a, b, c);
}

static void test_expand(void) {
    int64_t s31[2] = {3, 1}, target[3] = {2, 3, 4}, keep[3] = {2, -1, 4};
    const float v[3] = {1, 2, 3};
    cml_tensor *x = ft_from(2, s31, v);
    cml_tensor *e = cml_expand(x, 3, target), *e2 = cml_expand(x, 3, keep);
    double ref[24];
    for (int i = 0; i < 24; i++) ref[i] = (double)((i / 4) % 3 + 1);
    FT_CHECK_EQUAL(e, 3, target, ref, "expand (3, 1) -> (2, 3, 4)");
    FT_CHECK_EQUAL(e2, 3, target, ref, "expand with -1");
    if (e) {
        CHECK(cml_tensor_stride(e, 0) == 0 && cml_tensor_stride(e, 1) == 1 && cml_tensor_stride(e, 2) == 0);
        CHECK(cml_tensor_data(e) == cml_tensor_data(x) && !cml_tensor_is_contiguous(e));
        /* a copy of an expanded tensor is dense */
        cml_tensor *c = cml_contiguous(e);
        FT_CHECK_EQUAL(c, 3, target, ref, "contiguous of an expanded tensor");
        if (c) CHECK(cml_tensor_is_contiguous(c) && cml_tensor_stride(c, 0) == 12);
        cml_tensor_release(c);
    }
    /* an op over an expanded input broadcasts like the stride-0 layout says */
    cml_tensor *s = cml_sum(e, NULL, 0, false);
    CHECK(s && cml_tensor_item(s) == 48.0);
    int64_t bad[2] = {3, 4}, fewer[1] = {3}, neg_lead[3] = {-1, 3, 1};
    int64_t s32[2] = {3, 2};
    cml_tensor *x32 = cml_tensor_ones(2, s32, CML_F32, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_expand(x32, 2, bad) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_expand: cannot expand [3, 2] to [3, 4]");
    cml_clear_error();
    CHECK(cml_expand(x, 1, fewer) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_expand: ndim=1 must be in [2, 8]");
    cml_clear_error();
    CHECK(cml_expand(x, 3, neg_lead) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cannot expand");
    FT_RELEASE(x, e, e2, s, x32);
}

static void test_squeeze_unsqueeze_flatten(void) {
    int64_t s234[3] = {2, 3, 4};
    cml_tensor *x = iota(3, s234);
    double *ref = iota_ref(24);
    int64_t u0[4] = {1, 2, 3, 4}, u3[4] = {2, 3, 4, 1}, um1[4] = {2, 3, 4, 1}, u2[4] = {2, 3, 1, 4};
    cml_tensor *a = cml_unsqueeze(x, 0), *b = cml_unsqueeze(x, 3), *c = cml_unsqueeze(x, -1), *d = cml_unsqueeze(x, -2);
    FT_CHECK_EQUAL(a, 4, u0, ref, "unsqueeze 0");
    FT_CHECK_EQUAL(b, 4, u3, ref, "unsqueeze 3");
    FT_CHECK_EQUAL(c, 4, um1, ref, "unsqueeze -1");
    FT_CHECK_EQUAL(d, 4, u2, ref, "unsqueeze -2");
    cml_tensor *sq = cml_squeeze(d, 2), *sq2 = cml_squeeze(a, -4);
    FT_CHECK_EQUAL(sq, 3, s234, ref, "squeeze 2");
    FT_CHECK_EQUAL(sq2, 3, s234, ref, "squeeze -4");
    if (sq) CHECK(cml_tensor_data(sq) == cml_tensor_data(x));
    int64_t f12[2] = {2, 12}, f6[2] = {6, 4}, f24[1] = {24};
    cml_tensor *f1 = cml_flatten(x, 1, 2), *f2 = cml_flatten(x, 0, -2), *f3 = cml_flatten(x, 0, -1), *f4 = cml_flatten(x, 1, 1);
    FT_CHECK_EQUAL(f1, 2, f12, ref, "flatten(1, 2)");
    FT_CHECK_EQUAL(f2, 2, f6, ref, "flatten(0, -2)");
    FT_CHECK_EQUAL(f3, 1, f24, ref, "flatten all");
    FT_CHECK_EQUAL(f4, 3, s234, ref, "flatten(1, 1)");
    /* flatten of a transposed tensor copies */
    cml_tensor *t = cml_transpose(x, 0, 2);
    cml_tensor *ft = cml_flatten(t, 0, -1);
    double tref[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++) tref[(i * 3 + j) * 2 + k] = (double)((k * 3 + j) * 4 + i);
    FT_CHECK_EQUAL(ft, 1, f24, tref, "flatten of a transposed tensor");
    cml_tensor *s = cml_tensor_scalar(5.0, CML_F32, CML_DEVICE_CPU);
    cml_tensor *fs = cml_flatten(s, 0, -1), *us = cml_unsqueeze(s, 0);
    int64_t one[1] = {1};
    const double five = 5.0;
    FT_CHECK_EQUAL(fs, 1, one, &five, "flatten of a 0-d tensor");
    FT_CHECK_EQUAL(us, 1, one, &five, "unsqueeze of a 0-d tensor");
    cml_clear_error();
    CHECK(cml_squeeze(x, 0) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_squeeze: dim=0 must name a size-1 dim of a 3-d tensor");
    cml_clear_error();
    CHECK(cml_squeeze(x, 5) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "dim=5");
    cml_clear_error();
    CHECK(cml_unsqueeze(x, 4) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_unsqueeze: dim=4 out of range for a 3-d tensor");
    cml_clear_error();
    CHECK(cml_flatten(x, 2, 1) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_flatten: start_dim=2, end_dim=1");
    int64_t eight[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    cml_tensor *x8 = cml_tensor_zeros(8, eight, CML_F32, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_unsqueeze(x8, 0) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_unsqueeze");
    free(ref);
    FT_RELEASE(x, a, b, c, d, sq, sq2, f1, f2, f3, f4, t, ft, s, fs, us, x8);
}

/* ---- copies --------------------------------------------------------------------------- */

static void test_contiguous_clone_to_dtype(void) {
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    cml_tensor *x = iota(2, s23);
    cml_tensor *c = cml_contiguous(x);
    CHECK(c == x); /* already contiguous: the same tensor, retained */
    cml_tensor_release(c);
    cml_tensor *t = cml_transpose(x, 0, 1);
    cml_tensor *tc = cml_contiguous(t);
    const double tref[6] = {0, 3, 1, 4, 2, 5};
    FT_CHECK_EQUAL(tc, 2, s32, tref, "contiguous of a transpose");
    if (tc) CHECK(tc != t && cml_tensor_is_contiguous(tc) && !shares_storage(tc, x));

    /* clone: a new, independent copy (of a view too) */
    cml_tensor *cl = cml_clone(t);
    FT_CHECK_EQUAL(cl, 2, s32, tref, "clone of a transpose");
    if (cl) {
        ((float *)cml_tensor_data(cl))[0] = 100.0f;
        CHECK(((float *)cml_tensor_data(x))[0] == 0.0f);
    }

    /* to_dtype: the same tensor for the same dtype; rounding and saturation otherwise */
    cml_tensor *same = cml_to_dtype(x, CML_F32);
    CHECK(same == x);
    cml_tensor_release(same);
    int64_t s6[1] = {6};
    const float v[6] = {1.5f, -2.5f, 300.0f, -7.0f, 0.1f, 1000.0f};
    cml_tensor *src = ft_from(1, s6, v);
    static const struct {
        cml_dtype dt;
        double want[6];
    } conv[] = {
        {CML_I32, {2, -2, 300, -7, 0, 1000}},
        {CML_I64, {2, -2, 300, -7, 0, 1000}},
        {CML_U8, {2, 0, 255, 0, 0, 255}},
        {CML_F16, {1.5, -2.5, 300, -7, 0.0999755859375, 1000}},
        {CML_BF16, {1.5, -2.5, 300, -7, 0.10009765625, 1000}},
        {CML_F8E4M3, {1.5, -2.5, 288, -7, 0.1015625, 448}},
    };
    for (int i = 0; i < FT_LEN(conv); i++) {
        cml_tensor *y = cml_to_dtype(src, conv[i].dt);
        char what[48];
        snprintf(what, sizeof what, "f32 -> %s", cml_dtype_name(conv[i].dt));
        FT_CHECK_EQUAL(y, 1, s6, conv[i].want, what);
        if (y) CHECK(cml_tensor_dtype(y) == conv[i].dt);
        /* and of a strided view */
        cml_tensor *sv = cml_slice(src, 0, 1, 6, 2), *ys = cml_to_dtype(sv, conv[i].dt);
        const double wv[3] = {conv[i].want[1], conv[i].want[3], conv[i].want[5]};
        int64_t s3[1] = {3};
        FT_CHECK_EQUAL(ys, 1, s3, wv, what);
        FT_RELEASE(y, sv, ys);
    }
    /* integer to integer is exact beyond 2^24 */
    const int64_t big[2] = {16777217, -16777219};
    int64_t s2[1] = {2};
    cml_tensor *bi = ft_from_i64(1, s2, big), *b32 = cml_to_dtype(bi, CML_I32);
    const double wbig[2] = {16777217, -16777219};
    FT_CHECK_EQUAL(b32, 1, s2, wbig, "i64 -> i32");
    cml_clear_error();
    CHECK(cml_to_dtype(x, (cml_dtype)99) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_to_dtype: invalid dtype 99");

    /* copy_ and fill_ into views */
    cml_tensor *dst = cml_tensor_zeros(2, s23, CML_F32, CML_DEVICE_CPU);
    cml_tensor *dcol = cml_slice(dst, 1, 1, 2, 1);
    CHECK_OK(cml_tensor_fill_(dcol, 9.0));
    cml_tensor *dt = cml_transpose(dst, 0, 1);
    cml_tensor *srcT = iota(2, s32);
    cml_tensor *drow = cml_slice(dt, 0, 2, 3, 1);     /* (1, 2): column 2 of dst */
    cml_tensor *srow = cml_slice(srcT, 0, 0, 1, 1);   /* (1, 2): {0, 1} */
    CHECK_OK(cml_tensor_copy_(drow, srow));
    const double wdst[6] = {0, 9, 0, 0, 9, 1};
    FT_CHECK_EQUAL(dst, 2, s23, wdst, "fill_ and copy_ through views");
    CHECK_STATUS(cml_tensor_copy_(dst, srcT), CML_ERR_SHAPE, "cml_tensor_copy_: src shape [3, 2] must equal dst shape [2, 3]");
    CHECK_STATUS(cml_tensor_fill_(NULL, 1.0), CML_ERR_INVALID_ARG, "cml_tensor_fill_");
    FT_RELEASE(x, t, tc, cl, src, bi, b32, dst, dcol, dt, srcT, drow, srow);
}

/* ---- storage sharing and reference counts ----------------------------------------------- */

static void test_views_share_storage(void) {
    int64_t s34[2] = {3, 4};
    cml_tensor *x = cml_tensor_zeros(2, s34, CML_F32, CML_DEVICE_CPU);
    cml_tensor *row = cml_slice(x, 0, 1, 2, 1);             /* (1, 4) */
    cml_tensor *t = cml_transpose(x, 0, 1);                  /* (4, 3) */
    int64_t s12[1] = {12};
    cml_tensor *flat = cml_view(x, 1, s12);
    /* write through each view's data pointer at its strides */
    ((float *)cml_tensor_data(row))[2 * cml_tensor_stride(row, 1)] = 5.0f;           /* x[1][2] */
    ((float *)cml_tensor_data(t))[3 * cml_tensor_stride(t, 0) + 2 * cml_tensor_stride(t, 1)] = 7.0f; /* x[2][3] */
    ((float *)cml_tensor_data(flat))[0] = 1.0f;                                        /* x[0][0] */
    double want[12] = {1, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 7};
    FT_CHECK_EQUAL(x, 2, s34, want, "writes through views land in the base");
    /* fill_ on the base is visible in the views */
    CHECK_OK(cml_tensor_fill_(x, 2.0));
    int64_t at[2] = {0, 3};
    CHECK(cml_tensor_item_at(row, at) == 2.0);
    FT_RELEASE(row, t, flat, x);
}

static void test_refcounts(void) {
    int64_t s[2] = {4, 5};
    /* release the base first: views keep the storage alive */
    cml_tensor *x = iota(2, s);
    cml_tensor *v1 = cml_slice(x, 1, 1, 4, 1), *v2 = cml_transpose(v1, 0, 1), *v3 = cml_expand(v2, 3, (int64_t[]){2, 3, 4});
    cml_tensor_release(x);
    cml_tensor_release(v1);
    int64_t at[3] = {1, 2, 3};
    CHECK(v3 && cml_tensor_item_at(v3, at) == 3 * 5 + 3); /* x[3][1 + 2] */
    cml_tensor_release(v3);
    CHECK(v2 && cml_tensor_item_at(v2, (int64_t[]){0, 0}) == 1.0);
    cml_tensor_release(v2);
    /* retain / release pairs; release_all sets entries to NULL */
    cml_tensor *y = cml_tensor_ones(2, s, CML_F32, CML_DEVICE_CPU);
    CHECK(cml_tensor_retain(y) == y);
    cml_tensor_release(y);
    cml_tensor *arr[3] = {y, NULL, cml_tensor_retain(y)};
    cml_tensor_release_all(arr, 3);
    CHECK(arr[0] == NULL && arr[2] == NULL);
    cml_tensor_release(NULL);
    CHECK(cml_tensor_retain(NULL) == NULL);
    /* the CPU allocator is back where it started once everything is released */
    size_t before = cml_cpu_bytes_in_use();
    cml_tensor *a = cml_tensor_zeros(2, s, CML_F32, CML_DEVICE_CPU);
    cml_tensor *b = cml_transpose(a, 0, 1), *c = cml_contiguous(b), *d = cml_clone(c);
    CHECK(cml_cpu_bytes_in_use() >= before + 3 * 20 * sizeof(float));
    FT_RELEASE(d, a, c, b);
    CHECK(cml_cpu_bytes_in_use() == before);
}

/* ---- printing ---------------------------------------------------------------------------- */

/* Prints t into a temporary file and returns the text (caller frees). */
static char *print_to_string(const cml_tensor *t) {
    FILE *f = tmpfile();
    if (!f) return NULL;
    cml_tensor_print(t, f);
    long n = ftell(f);
    rewind(f);
    char *s = ft_malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

#define CHECK_CONTAINS(text, sub) CHECK_MSG((text) && strstr((text), (sub)), "\"%s\" not found in:\n%s", (sub), (text) ? (text) : "(null)")
#define CHECK_LACKS(text, sub) CHECK_MSG((text) && !strstr((text), (sub)), "\"%s\" unexpectedly in:\n%s", (sub), (text) ? (text) : "(null)")

static void test_print(void) {
    int64_t s23[2] = {2, 3};
    const float v[6] = {1.5f, -2.0f, 3.25f, 4.0f, 1e-3f, 600.0f};
    cml_tensor *x = ft_from(2, s23, v);
    char *p = print_to_string(x);
    CHECK_CONTAINS(p, "tensor(f32[2, 3], cpu)");
    CHECK_CONTAINS(p, "1.5");
    CHECK_CONTAINS(p, "-2");
    CHECK_CONTAINS(p, "3.25");
    CHECK_CONTAINS(p, "0.001");
    CHECK_CONTAINS(p, "600");
    CHECK_CONTAINS(p, "[[");
    CHECK_LACKS(p, "...");
    free(p);
    /* a view prints its own elements */
    cml_tensor *t = cml_transpose(x, 0, 1);
    p = print_to_string(t);
    CHECK_CONTAINS(p, "f32[3, 2]");
    CHECK_CONTAINS(p, "[1.5, 4]");
    free(p);
    /* long dims are elided */
    cml_tensor *l = cml_tensor_arange(0, 20, 1, CML_I64, CML_DEVICE_CPU);
    p = print_to_string(l);
    CHECK_CONTAINS(p, "tensor(i64[20], cpu)");
    CHECK_CONTAINS(p, "[0, 1, 2, ..., 17, 18, 19]");
    CHECK_LACKS(p, "10");
    free(p);
    int64_t s20[2] = {20, 2};
    cml_tensor *l2 = cml_tensor_zeros(2, s20, CML_BF16, CML_DEVICE_CPU);
    p = print_to_string(l2);
    CHECK_CONTAINS(p, "bf16[20, 2]");
    CHECK_CONTAINS(p, "...");
    free(p);
    /* 0-d, empty, special values, requires_grad */
    cml_tensor *s = cml_tensor_scalar(-0.5, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(s, true);
    p = print_to_string(s);
    CHECK_CONTAINS(p, "tensor(f32[], cpu, requires_grad)");
    CHECK_CONTAINS(p, "-0.5");
    free(p);
    int64_t s0[2] = {2, 0};
    cml_tensor *e = cml_tensor_zeros(2, s0, CML_F32, CML_DEVICE_CPU);
    p = print_to_string(e);
    CHECK_CONTAINS(p, "f32[2, 0]");
    free(p);
    const float sp[3] = {NAN, INFINITY, -INFINITY};
    int64_t s3[1] = {3};
    cml_tensor *spec = ft_from(1, s3, sp);
    p = print_to_string(spec);
    CHECK_CONTAINS(p, "[nan, inf, -inf]");
    free(p);
    p = print_to_string(NULL);
    CHECK_CONTAINS(p, "tensor(NULL)");
    free(p);
    char buf[32];
    CHECK(strcmp(cml_tensor_describe(x, buf, sizeof buf), "f32[2, 3]") == 0);
    CHECK(strcmp(cml_tensor_describe(s, buf, sizeof buf), "f32[]") == 0);
    /* a short buffer truncates without overflowing */
    char small[5];
    cml_tensor_describe(x, small, sizeof small);
    CHECK(strlen(small) == 4);
    FT_RELEASE(x, t, l, l2, s, e, spec);
}

/* ---- NULL inputs to every view/copy function ------------------------------------------- */

static void test_null_arguments(void) {
    int64_t shape[1] = {2};
    int dims[1] = {0};
    struct {
        const char *name;
        cml_tensor *result;
    } calls[12];
    int n = 0;
#define NULL_CALL(fn, expr)                 \
    do {                                    \
        cml_clear_error();                  \
        calls[n].name = fn;                 \
        calls[n].result = (expr);           \
        CHECK(calls[n].result == NULL);     \
        CHECK_ERROR(CML_ERR_INVALID_ARG, fn); \
        n++;                                \
    } while (0)
    NULL_CALL("cml_reshape", cml_reshape(NULL, 1, shape));
    NULL_CALL("cml_view", cml_view(NULL, 1, shape));
    NULL_CALL("cml_transpose", cml_transpose(NULL, 0, 1));
    NULL_CALL("cml_permute", cml_permute(NULL, dims));
    NULL_CALL("cml_slice", cml_slice(NULL, 0, 0, 1, 1));
    NULL_CALL("cml_expand", cml_expand(NULL, 1, shape));
    NULL_CALL("cml_unsqueeze", cml_unsqueeze(NULL, 0));
    NULL_CALL("cml_squeeze", cml_squeeze(NULL, 0));
    NULL_CALL("cml_flatten", cml_flatten(NULL, 0, -1));
    NULL_CALL("cml_contiguous", cml_contiguous(NULL));
    NULL_CALL("cml_to_dtype", cml_to_dtype(NULL, CML_F16));
    NULL_CALL("cml_clone", cml_clone(NULL));
#undef NULL_CALL
    /* an earlier error is kept through a chain of calls */
    cml_clear_error();
    int64_t bad[1] = {-3};
    cml_tensor *r = cml_clone(cml_transpose(cml_tensor_zeros(1, bad, CML_F32, CML_DEVICE_CPU), 0, 0));
    CHECK(r == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "shape[0]=-3");
}

int main(void) {
    RUN(test_creation_fill);
    RUN(test_arange);
    RUN(test_rand);
    RUN(test_host_round_trip);
    RUN(test_creation_errors);
    RUN(test_reshape_and_view);
    RUN(test_transpose_permute);
    RUN(test_slice);
    RUN(test_expand);
    RUN(test_squeeze_unsqueeze_flatten);
    RUN(test_contiguous_clone_to_dtype);
    RUN(test_views_share_storage);
    RUN(test_refcounts);
    RUN(test_print);
    RUN(test_null_arguments);
    return th_finish();
}
