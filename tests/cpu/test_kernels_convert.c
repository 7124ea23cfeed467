/* Scaled fp8 conversions (cml_convert_scaled, CPU) against the scalar routines
 * of camel/dtype.h, which are themselves pinned to hand-checked codes here:
 * from fp8, every one of the 256 codes of e4m3 and e5m2 into f32/f16/bf16
 * under several scales (exact bits); to fp8, random values over the whole
 * range plus the edges (largest finite value, just past it, overflow,
 * infinities, NaN of both signs, fp8 subnormals and their rounding ties, f32
 * subnormals, signed zeros) from f32/f16/bf16; amax; error paths. */
#include "kernel_test_util.h"

static const cml_dtype FP8[2] = {CML_F8E4M3, CML_F8E5M2};
static const cml_dtype WIDE[3] = {CML_F32, CML_F16, CML_BF16};

static uint32_t bits(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}
static float from_bits(uint32_t u) {
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/* The kernels.h rule, written out: NaN product -> quiet NaN with sign(x) ^ sign(scale). */
static float product(float x, float s) {
    float p = x * s;
    return p != p ? from_bits(0x7FC00000u | ((bits(x) ^ bits(s)) & 0x80000000u)) : p;
}

static uint8_t expect_fp8(cml_dtype dt, float x, float s) {
    const float p = product(x, s), m = dt == CML_F8E4M3 ? 448.0f : 57344.0f;
    if (p != p) return (uint8_t)((bits(p) >> 24 & 0x80u) | (dt == CML_F8E4M3 ? 0x7Fu : 0x7Eu));
    const float c = p > m ? m : p < -m ? -m : p;
    return dt == CML_F8E4M3 ? cml_f32_to_f8e4m3(c) : cml_f32_to_f8e5m2(c);
}

static float fp8_value(cml_dtype dt, uint8_t code) { return dt == CML_F8E4M3 ? cml_f8e4m3_to_f32(code) : cml_f8e5m2_to_f32(code); }

/* The scalar routines the tests build on, pinned to values worked out by hand. */
static void test_scalar_anchor(void) {
    CHECK(cml_f8e4m3_to_f32(0x7E) == 448.0f);
    CHECK(cml_f8e4m3_to_f32(0x08) == ldexpf(1, -6));  /* smallest normal */
    CHECK(cml_f8e4m3_to_f32(0x01) == ldexpf(1, -9));  /* smallest subnormal */
    CHECK(cml_f8e4m3_to_f32(0xB8) == -1.0f);
    CHECK(isnan(cml_f8e4m3_to_f32(0x7F)) && isnan(cml_f8e4m3_to_f32(0xFF)));
    CHECK(cml_f8e5m2_to_f32(0x7B) == 57344.0f);
    CHECK(cml_f8e5m2_to_f32(0x7C) == INFINITY && cml_f8e5m2_to_f32(0xFC) == -INFINITY);
    CHECK(cml_f8e5m2_to_f32(0x01) == ldexpf(1, -16));
    CHECK(isnan(cml_f8e5m2_to_f32(0x7D)) && isnan(cml_f8e5m2_to_f32(0x7E)));
    CHECK(cml_f32_to_f8e4m3(ldexpf(1, -10)) == 0x00);          /* a tie with 0 and 2^-9: to even, 0 */
    CHECK(cml_f32_to_f8e4m3(3 * ldexpf(1, -10)) == 0x02);      /* a tie between codes 1 and 2: 2 */
    CHECK(cml_f32_to_f8e4m3(1.0625f) == 0x38);                 /* 1 + 1/16 ties to 1.0 */
    CHECK(cml_f32_to_f8e4m3(1.1875f) == 0x3A);                 /* 1 + 3/16 ties to 1.25 */
    CHECK(cml_f32_to_f8e5m2(1.125f) == 0x3C);                  /* 1 + 1/8 ties to 1.0 */
}

/* Every fp8 code into every wide dtype under several scales: bitwise equal to
 * decode -> f32 multiply -> the dtype's store, with NaN as kernels.h says. */
static void test_from_fp8_exhaustive(void) {
    static const float scales[] = {1.0f, 0.5f, 3.7f, -2.0f, 1.0f / 4096.0f, 65536.0f, 1e30f, 1e-30f, 0.0f};
    uint8_t codes[256];
    for (int i = 0; i < 256; i++) codes[i] = (uint8_t)i;
    for (int f = 0; f < 2; f++)
        for (int w = 0; w < 3; w++)
            for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
                const cml_dtype xd = FP8[f], yd = WIDE[w];
                const size_t es = cml_dtype_size(yd);
                unsigned char got[256 * 4], want[256 * 4];
                th_poison(got, sizeof got);
                float amax = -1;
                CHECK_OK(cml_convert_scaled(kt_ctx(), got, yd, codes, xd, 256, &scales[k], &amax));
                float a = 0;
                for (int i = 0; i < 256; i++) {
                    const float v = fp8_value(xd, (uint8_t)i);
                    cml_dtype_store(want, yd, i, product(v, scales[k]));
                    a = isnan(v) || isnan(a) ? NAN : fmaxf(a, fabsf(v));
                }
                int bad = -1;
                for (int i = 0; i < 256 && bad < 0; i++)
                    if (memcmp(got + (size_t)i * es, want + (size_t)i * es, es) != 0) bad = i;
                CHECK_MSG(bad < 0, "%s -> %s scale %g: code 0x%02X gives %g, expected %g", cml_dtype_name(xd),
                          cml_dtype_name(yd), (double)scales[k], bad, (double)cml_dtype_load(got, yd, bad < 0 ? 0 : bad),
                          (double)cml_dtype_load(want, yd, bad < 0 ? 0 : bad));
                CHECK(isnan(amax) && isnan(a)); /* the NaN codes are among the inputs */
            }
    /* amax over the finite codes only: the largest finite value */
    for (int f = 0; f < 2; f++) {
        uint8_t fin[120];
        for (int i = 0; i < 120; i++) fin[i] = (uint8_t)(i + (i & 1) * 0x80); /* codes 0..119, every other negative */
        float y[120], amax = -1;
        CHECK_OK(cml_convert_scaled(kt_ctx(), y, CML_F32, fin, FP8[f], 120, NULL, &amax));
        CHECK(amax == fp8_value(FP8[f], 119));
        for (int i = 0; i < 120; i++) CHECK(y[i] == fp8_value(FP8[f], fin[i])); /* NULL scale: 1 */
    }
}

/* Values that probe every rule of the to-fp8 direction (before scaling). */
static int edge_values(float *v) {
    int n = 0;
    const float fixed[] = {0.0f, -0.0f, 1.0f, -1.0f, 448.0f, -448.0f, 449.0f, 463.9f, 464.0f, 465.0f, 480.0f, -500.0f,
                           57344.0f, -57344.0f, 61439.0f, 61440.0f, 65536.0f, 1e6f, -1e6f, 3.4e38f, -3.4e38f,
                           INFINITY, -INFINITY, NAN, -NAN, 1.0625f, 1.1875f, 1.125f, 1.375f};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) v[n++] = fixed[i];
    for (int e = -26; e <= -5; e++) /* fp8 subnormals, their ties and their neighbours */
        for (int m = 1; m <= 7; m++) {
            v[n++] = ldexpf((float)m, e);
            v[n++] = -ldexpf((float)m, e) * 1.01f;
        }
    v[n++] = from_bits(0x00000001u); /* f32 subnormals */
    v[n++] = from_bits(0x807FFFFFu);
    return n;
}

static void check_to_fp8(const float *vals, int n, cml_dtype xd, cml_dtype yd, float scale) {
    unsigned char *x = kt_malloc((size_t)n * 4);
    uint8_t *got = kt_malloc((size_t)n);
    for (int i = 0; i < n; i++) cml_dtype_store(x, xd, i, vals[i]);
    th_poison(got, (size_t)n);
    float amax = -1, a = 0;
    CHECK_OK(cml_convert_scaled(kt_ctx(), got, yd, x, xd, n, &scale, &amax));
    int bad = -1;
    for (int i = 0; i < n; i++) {
        const float v = cml_dtype_load(x, xd, i);
        a = isnan(v) || isnan(a) ? NAN : fmaxf(a, fabsf(v));
        if (bad < 0 && got[i] != expect_fp8(yd, v, scale)) bad = i;
    }
    CHECK_MSG(bad < 0, "%s -> %s scale %g: %.9g gives 0x%02X, expected 0x%02X", cml_dtype_name(xd), cml_dtype_name(yd),
              (double)scale, bad < 0 ? 0.0 : (double)cml_dtype_load(x, xd, bad), bad < 0 ? 0 : got[bad],
              bad < 0 ? 0 : expect_fp8(yd, cml_dtype_load(x, xd, bad), scale));
    CHECK_MSG(bits(amax) == bits(a) || (isnan(amax) && isnan(a)), "amax %g, expected %g", (double)amax, (double)a);
    free(x);
    free(got);
}

static void test_to_fp8(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 70);
    float vals[4096];
    const int ne = edge_values(vals);
    static const float scales[] = {1.0f, 0.5f, 2.0f, 0.37f, -3.0f, 1.0f / 1024.0f, 4096.0f};
    for (int f = 0; f < 2; f++)
        for (int w = 0; w < 3; w++)
            for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) check_to_fp8(vals, ne, WIDE[w], FP8[f], scales[k]);
    /* random values over 2^-30 .. 2^20, both signs, a new draw per dtype pair */
    for (int f = 0; f < 2; f++)
        for (int w = 0; w < 3; w++) {
            for (int i = 0; i < 4096; i++) {
                const float mag = ldexpf(1.0f + cml_rng_uniform(&rng), (int)(cml_rng_u32(&rng) % 51) - 30);
                vals[i] = cml_rng_u32(&rng) & 1 ? -mag : mag;
            }
            check_to_fp8(vals, 4096, WIDE[w], FP8[f], 1.0f);
            check_to_fp8(vals, 4096, WIDE[w], FP8[f], 0.73f);
        }
    /* a NaN scale: every product is NaN, with sign(x) ^ sign(scale) */
    const float xs[4] = {1, -1, 0, INFINITY};
    uint8_t y[4];
    const float nan_scale = -NAN;
    CHECK_OK(cml_convert_scaled(kt_ctx(), y, CML_F8E4M3, xs, CML_F32, 4, &nan_scale, NULL));
    CHECK(y[0] == 0xFF && y[1] == 0x7F && y[2] == 0xFF && y[3] == 0xFF);
    /* saturation, not infinity, for e5m2; +-inf saturates too */
    const float big[4] = {1e6f, -1e6f, INFINITY, -INFINITY};
    CHECK_OK(cml_convert_scaled(kt_ctx(), y, CML_F8E5M2, big, CML_F32, 4, NULL, NULL));
    CHECK(y[0] == 0x7B && y[1] == 0xFB && y[2] == 0x7B && y[3] == 0xFB);
    CHECK_OK(cml_convert_scaled(kt_ctx(), y, CML_F8E4M3, big, CML_F32, 4, NULL, NULL));
    CHECK(y[0] == 0x7E && y[1] == 0xFE && y[2] == 0x7E && y[3] == 0xFE);
}

/* A long input (several CPU blocks, threads) matches element by element; amax is the
 * same with 1 thread and with all of them. */
static void test_long_and_threads(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 71);
    const int64_t n = 300001;
    float *x = kt_malloc((size_t)n * 4);
    uint8_t *y1 = kt_malloc((size_t)n), *y2 = kt_malloc((size_t)n);
    th_fill_uniform(x, n, -600, 600, &rng);
    x[123457] = -1000.5f; /* the amax, past the first block */
    const float s = 0.8f;
    float a1 = -1, a2 = -1;
    const int threads = cml_cpu_threads();
    CHECK_OK(cml_convert_scaled(kt_ctx(), y1, CML_F8E4M3, x, CML_F32, n, &s, &a1));
    cml_set_cpu_threads(1);
    CHECK_OK(cml_convert_scaled(kt_ctx(), y2, CML_F8E4M3, x, CML_F32, n, &s, &a2));
    cml_set_cpu_threads(threads);
    CHECK(memcmp(y1, y2, (size_t)n) == 0);
    CHECK(a1 == 1000.5f && a2 == 1000.5f);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += y1[i] != expect_fp8(CML_F8E4M3, x[i], s);
    CHECK(bad == 0);
    free(x), free(y1), free(y2);
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float x[8] = {0}, amax = -1;
    uint8_t y[8];
    CHECK_STATUS(cml_convert_scaled(ctx, y, CML_BF16, x, CML_F32, 8, NULL, NULL), CML_ERR_DTYPE,
                 "cml_convert_scaled: x_dtype=f32, y_dtype=bf16: one of them must be f8e4m3 or f8e5m2");
    CHECK_STATUS(cml_convert_scaled(ctx, y, CML_F8E4M3, x, CML_F8E5M2, 8, NULL, NULL), CML_ERR_DTYPE,
                 "the other f32, f16 or bf16");
    CHECK_STATUS(cml_convert_scaled(ctx, y, CML_F8E4M3, x, CML_I32, 8, NULL, NULL), CML_ERR_DTYPE, "x_dtype=i32");
    CHECK_STATUS(cml_convert_scaled(ctx, y, (cml_dtype)99, x, CML_F32, 8, NULL, NULL), CML_ERR_DTYPE,
                 "y_dtype=99 is not a valid dtype");
    CHECK_STATUS(cml_convert_scaled(ctx, y, CML_F8E4M3, x, CML_F32, -1, NULL, NULL), CML_ERR_INVALID_ARG,
                 "cml_convert_scaled: n=-1 must be >= 0");
    CHECK_STATUS(cml_convert_scaled(ctx, NULL, CML_F8E4M3, x, CML_F32, 8, NULL, NULL), CML_ERR_INVALID_ARG,
                 "y must not be NULL");
    CHECK_STATUS(cml_convert_scaled(ctx, y, CML_F8E4M3, NULL, CML_F32, 8, NULL, NULL), CML_ERR_INVALID_ARG,
                 "x must not be NULL");
    CHECK_STATUS(cml_convert_scaled(NULL, y, CML_F8E4M3, x, CML_F32, 8, NULL, NULL), CML_ERR_INVALID_ARG,
                 "ctx must not be NULL");
    CHECK_STATUS(cml_convert_scaled(ctx, (char *)x + 8, CML_F8E4M3, x, CML_F32, 8, NULL, NULL), CML_ERR_INVALID_ARG,
                 "y and x overlap");
    /* n == 0: nothing to read; amax is the maximum over nothing, 0 */
    CHECK_OK(cml_convert_scaled(ctx, NULL, CML_F8E4M3, NULL, CML_F32, 0, NULL, &amax));
    CHECK(amax == 0.0f);
    cml_ctx fake = kt_fake_cuda_ctx_unusable();
    KT_CHECK_CUDA_DISPATCH(cml_convert_scaled(&fake, y, CML_F8E4M3, x, CML_F32, 8, NULL, NULL));
}

int main(void) {
    RUN(test_scalar_anchor);
    RUN(test_from_fp8_exhaustive);
    RUN(test_to_fp8);
    RUN(test_long_and_threads);
    RUN(test_errors);
    return kt_finish();
}
