/* GPU tests of the scaled fp8 conversions (src/kernels/cuda/ewise/convert_scaled.cu)
 * against the CPU path, which tests/cpu/test_kernels_convert.c checks against
 * the scalar routines of camel/dtype.h. Results must be bitwise equal (NaN
 * codes and signs included):
 * - from fp8: all 256 codes of e4m3 and e5m2, repeated, into f32/f16/bf16,
 *   under several scales;
 * - to fp8: edge values (the largest finite value, just past it, overflow,
 *   infinities, NaN of both signs, fp8 subnormals and their rounding ties, f32
 *   subnormals, signed zeros) and random values over 2^-30 .. 2^20, from
 *   f32/f16/bf16, under several scales, one of them negative;
 * over lengths that are not multiples of the 16-element groups or the 512-element
 * warp groups (1, 15, 16, 17, 511, 513, 1573, 4097, 2^20 + 3, 9 2^20 + 517), with
 * 16-byte aligned buffers and buffers one element off (the scalar kernel); the
 * scale is read from device memory, or NULL; amax must equal the CPU's exactly
 * (NaN when a NaN is present, 0 when n == 0).
 * Outputs (and amax) are poisoned before each run; a repeat run must give the
 * same bytes. Exits 77 ("skipped") without a GPU. */
#include "gpu_row_util.h"

static const cml_dtype FP8[2] = {CML_F8E4M3, CML_F8E5M2};
static const cml_dtype WIDE[3] = {CML_F32, CML_F16, CML_BF16};

static float from_bits(uint32_t u) {
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/* One conversion of n elements of host input hx (dtype xd) on both devices; off shifts both
 * buffers by one element off 16-byte alignment. */
static void run_convert(const char *what, const void *hx, cml_dtype xd, cml_dtype yd, int64_t n, float scale,
                        bool use_scale, bool off) {
    const size_t xs = cml_dtype_size(xd), ys = cml_dtype_size(yd);
    const size_t xo = off ? xs : 0, yo = off ? ys : 0;
    const size_t xbytes = (size_t)n * xs + xo, ybytes = (size_t)n * ys + yo;
    unsigned char *want = malloc(ybytes + 1), *got = malloc(ybytes + 1), *again = malloc(ybytes + 1),
                  *noamax = malloc(ybytes + 1);
    void *dx = dev_alloc(xbytes), *dy = dev_alloc(ybytes), *ds = dev_alloc(8);
    bool ok = want && got && again && noamax && dx && dy && ds;
    CHECK(ok);
    if (ok) {
        float amax_cpu = -1, amax_gpu[2];
        memset(want, 0xFF, ybytes);
        CHECK_OK(cml_convert_scaled(cctx, want + yo, yd, (const char *)hx, xd, n, use_scale ? &scale : NULL, &amax_cpu));
        unsigned char *staged = malloc(xbytes + 1);
        CHECK(staged != NULL);
        if (staged) {
            memset(staged, 0, xbytes);
            memcpy(staged + xo, hx, (size_t)n * xs);
            upload(dx, staged, xbytes);
            free(staged);
        }
        upload(ds, &scale, sizeof scale);
        float *damax = (float *)((char *)ds + 4);
        for (int rep = 0; rep < 2; rep++) {
            poison(dy, ybytes);
            poison(damax, 4);
            CHECK_OK(cml_convert_scaled(gctx, (char *)dy + yo, yd, (char *)dx + xo, xd, n, use_scale ? (const float *)ds : NULL,
                                        damax));
            download(rep ? again : got, dy, ybytes);
            download(&amax_gpu[rep], damax, 4);
        }
        /* without amax (kernels of their own): the same codes */
        poison(dy, ybytes);
        CHECK_OK(cml_convert_scaled(gctx, (char *)dy + yo, yd, (char *)dx + xo, xd, n, use_scale ? (const float *)ds : NULL,
                                    NULL));
        download(noamax, dy, ybytes);
        CHECK_MSG(memcmp(got, noamax, ybytes) == 0, "%s %s -> %s n=%lld: the conversion without amax differs", what,
                  cml_dtype_name(xd), cml_dtype_name(yd), (long long)n);
        int64_t bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++)
            if (memcmp(got + yo + (size_t)i * ys, want + yo + (size_t)i * ys, ys) != 0) bad = i;
        if (bad >= 0) {
            uint32_t g = 0, w = 0, xb = 0;
            memcpy(&g, got + yo + (size_t)bad * ys, ys);
            memcpy(&w, want + yo + (size_t)bad * ys, ys);
            memcpy(&xb, (const char *)hx + (size_t)bad * xs, xs);
            CHECK_MSG(false, "%s %s -> %s n=%lld scale=%g off=%d: element %lld (x bits 0x%X = %g): GPU 0x%X, CPU 0x%X",
                      what, cml_dtype_name(xd), cml_dtype_name(yd), (long long)n, (double)scale, off, (long long)bad, xb,
                      (double)cml_dtype_load(hx, xd, bad), g, w);
        }
        CHECK_MSG(memcmp(got, again, ybytes) == 0, "%s: a repeat run differs", what);
        uint32_t a0, a1, ac;
        memcpy(&a0, &amax_gpu[0], 4), memcpy(&a1, &amax_gpu[1], 4), memcpy(&ac, &amax_cpu, 4);
        CHECK_MSG(a0 == ac && a1 == ac, "%s %s -> %s n=%lld: amax GPU %g (0x%08X), CPU %g (0x%08X)", what,
                  cml_dtype_name(xd), cml_dtype_name(yd), (long long)n, (double)amax_gpu[0], a0, (double)amax_cpu, ac);
    }
    free(want), free(got), free(again), free(noamax);
    dev_free(dx, xbytes), dev_free(dy, ybytes), dev_free(ds, 8);
}

/* 511 / 513 / 1573: around and past the vectorized kernel's 512-element warp groups (the rest
 * element by element); 9 Mi + 517: more warp groups than the grid has warps (a grid-stride loop) */
static const int64_t LENGTHS[] = {1, 15, 16, 17, 511, 513, 1573, 4097, (1 << 20) + 3, (9 << 20) + 517};
enum { N_LENGTHS = 10 };

static void test_from_fp8_all_codes(void) {
    static const float scales[] = {1.0f, 0.37f, -2.0f, 65536.0f, 1e30f};
    const int64_t nmax = LENGTHS[N_LENGTHS - 1];
    unsigned char *codes = malloc((size_t)nmax);
    CHECK(codes != NULL);
    if (!codes) return;
    for (int64_t i = 0; i < nmax; i++) codes[i] = (unsigned char)((i * 37 + i / 256) & 0xFF); /* every code, shuffled */
    for (int f = 0; f < 2; f++)
        for (int w = 0; w < 3; w++)
            for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
                run_convert("all codes", codes, FP8[f], WIDE[w], 256, scales[s], true, false);
                run_convert("all codes", codes, FP8[f], WIDE[w], 256, scales[s], true, true);
            }
    for (int f = 0; f < 2; f++)
        for (int w = 0; w < 3; w++)
            for (int l = 0; l < N_LENGTHS; l++) {
                if (under_sanitizer() && LENGTHS[l] > 5000) continue;
                run_convert("lengths", codes, FP8[f], WIDE[w], LENGTHS[l], 0.75f, true, false);
                run_convert("lengths", codes, FP8[f], WIDE[w], LENGTHS[l], 1.0f, false, l % 2 == 1);
            }
    free(codes);
}

/* Edge values first, then random magnitudes over 2^-30 .. 2^20 of both signs. */
static float *to_fp8_inputs(int64_t n) {
    float *v = malloc((size_t)n * sizeof(float));
    if (!v) return NULL;
    const float fixed[] = {0.0f, -0.0f, 1.0f, -1.0f, 448.0f, -448.0f, 449.0f, 463.9f, 464.0f, 465.0f, 480.0f, -500.0f,
                           57344.0f, -57344.0f, 61439.0f, 61440.0f, 65536.0f, 1e6f, -1e6f, 3.4e38f, -3.4e38f,
                           INFINITY, -INFINITY, NAN, -NAN, 1.0625f, 1.1875f, 1.125f, 1.375f,
                           from_bits(0x00000001u), from_bits(0x807FFFFFu)};
    int64_t k = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && k < n; i++) v[k++] = fixed[i];
    for (int e = -26; e <= -5 && k + 1 < n; e++)
        for (int m = 1; m <= 7 && k + 1 < n; m++) {
            v[k++] = ldexpf((float)m, e);
            v[k++] = -ldexpf((float)m, e) * 1.01f;
        }
    for (; k < n; k++) {
        const float mag = ldexpf(1.0f + cml_rng_uniform(&rng), (int)(cml_rng_u32(&rng) % 51) - 30);
        v[k] = cml_rng_u32(&rng) & 1 ? -mag : mag;
    }
    return v;
}

static void test_to_fp8(void) {
    static const float scales[] = {1.0f, 0.5f, 0.37f, -3.0f, 1.0f / 1024.0f, 4096.0f};
    const int64_t nmax = LENGTHS[N_LENGTHS - 1];
    float *vals = to_fp8_inputs(nmax);
    unsigned char *x = malloc((size_t)nmax * 4);
    CHECK(vals && x);
    if (!vals || !x) {
        free(vals), free(x);
        return;
    }
    for (int w = 0; w < 3; w++) {
        for (int64_t i = 0; i < nmax; i++) cml_dtype_store(x, WIDE[w], i, vals[i]);
        for (int f = 0; f < 2; f++) {
            for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
                run_convert("edges", x, WIDE[w], FP8[f], 4097, scales[s], true, false);
                run_convert("edges", x, WIDE[w], FP8[f], 4097, scales[s], true, true);
            }
            for (int l = 0; l < N_LENGTHS; l++) {
                if (under_sanitizer() && LENGTHS[l] > 5000) continue;
                run_convert("lengths", x, WIDE[w], FP8[f], LENGTHS[l], 0.8f, true, l % 2 == 0);
                run_convert("lengths", x, WIDE[w], FP8[f], LENGTHS[l], 1.0f, false, l % 2 == 1);
            }
        }
    }
    /* no NaN in the input: amax is the largest |x| (the NaN edges are the 24th and 25th values) */
    memcpy(x, vals, (size_t)nmax * 4);
    for (int f = 0; f < 2; f++) run_convert("no NaN", x + 25 * 4, CML_F32, FP8[f], 4000, 0.25f, true, false);
    free(vals), free(x);
}

/* n == 0: nothing is written but amax, which is 0. */
static void test_empty(void) {
    float *d = dev_alloc(8), h = -1;
    poison(d, 8);
    CHECK_OK(cml_convert_scaled(gctx, NULL, CML_F8E4M3, NULL, CML_F32, 0, NULL, d));
    download(&h, d, 4);
    CHECK(h == 0.0f);
    dev_free(d, 8);
}

int main(void) {
    int rc = gpu_test_init(86420);
    if (rc) return rc;
    RUN(test_from_fp8_all_codes);
    RUN(test_to_fp8);
    RUN(test_empty);
    return th_finish();
}
