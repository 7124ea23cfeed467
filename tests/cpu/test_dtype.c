/* Dtype conversions against an independent float64 model of each format:
 * every f16/bf16/fp8 code is decoded and compared, every non-NaN code round
 * trips, and f32 -> narrow rounding is compared with a brute-force nearest-
 * value search (ties to even) on midpoints, their neighbours and random values. */
#include "harness.h"

/* A narrow float format described independently of the library. */
typedef struct format {
    const char *name;
    int ebits, mbits;
    bool finite_only; /* e4m3fn: no inf, S.1111.111 is NaN, overflow saturates */
    uint32_t (*encode)(float);
    float (*decode)(uint32_t);
} format;

static uint32_t enc_f16(float x) { return cml_f32_to_f16(x); }
static float dec_f16(uint32_t c) { return cml_f16_to_f32((uint16_t)c); }
static uint32_t enc_bf16(float x) { return cml_f32_to_bf16(x); }
static float dec_bf16(uint32_t c) { return cml_bf16_to_f32((uint16_t)c); }
static uint32_t enc_e4m3(float x) { return cml_f32_to_f8e4m3(x); }
static float dec_e4m3(uint32_t c) { return cml_f8e4m3_to_f32((uint8_t)c); }
static uint32_t enc_e5m2(float x) { return cml_f32_to_f8e5m2(x); }
static float dec_e5m2(uint32_t c) { return cml_f8e5m2_to_f32((uint8_t)c); }

static const format formats[] = {
    {"f16", 5, 10, false, enc_f16, dec_f16},
    {"bf16", 8, 7, false, enc_bf16, dec_bf16},
    {"f8e4m3", 4, 3, true, enc_e4m3, dec_e4m3},
    {"f8e5m2", 5, 2, false, enc_e5m2, dec_e5m2},
};
#define NFORMATS 4

static int nbits(const format *f) { return 1 + f->ebits + f->mbits; }
static uint32_t ncodes(const format *f) { return 1u << nbits(f); }
static int bias(const format *f) { return (1 << (f->ebits - 1)) - 1; }

/* The magnitude a code would have if its exponent field were an ordinary one. */
static double magnitude_as_finite(const format *f, uint32_t code) {
    uint32_t e = (code >> f->mbits) & ((1u << f->ebits) - 1);
    uint32_t m = code & ((1u << f->mbits) - 1);
    if (e == 0) return m * pow(2.0, 1 - bias(f) - f->mbits);
    return (1.0 + m / pow(2.0, f->mbits)) * pow(2.0, (double)e - bias(f));
}

static double ref_decode(const format *f, uint32_t code) {
    uint32_t sign_bit = 1u << (nbits(f) - 1), mag = code & (sign_bit - 1);
    uint32_t e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1);
    double v;
    if (f->finite_only && mag == sign_bit - 1) v = NAN;
    else if (!f->finite_only && e == (1u << f->ebits) - 1) v = m ? NAN : INFINITY;
    else v = magnitude_as_finite(f, mag);
    return (code & sign_bit) ? -v : v;
}

/* Largest finite magnitude code. */
static uint32_t max_finite_code(const format *f) {
    uint32_t sign_bit = 1u << (nbits(f) - 1);
    return f->finite_only ? sign_bit - 2 : ((1u << f->ebits) - 1) << f->mbits;
}

/* Brute force: the nearest representable value, ties to the even code. */
static uint32_t ref_encode(const format *f, float x) {
    uint32_t sign_bit = 1u << (nbits(f) - 1);
    if (isnan(x)) return UINT32_MAX; /* any NaN: checked separately */
    uint32_t sign = signbit(x) ? sign_bit : 0;
    double a = fabs((double)x);
    uint32_t top = max_finite_code(f);             /* first code past the finite range (inf), or NaN for e4m3fn */
    uint32_t last = f->finite_only ? top : top - 1; /* largest finite */
    if (isinf(x)) return sign | (f->finite_only ? last : top);
    /* binary search: largest code c <= last with value(c) <= a */
    uint32_t lo = 0, hi = last;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (magnitude_as_finite(f, mid) <= a) lo = mid;
        else hi = mid - 1;
    }
    uint32_t below = lo;
    /* the value after the largest finite one, as if the exponent range went on */
    double above_v = magnitude_as_finite(f, below + 1);
    double below_v = magnitude_as_finite(f, below);
    uint32_t pick;
    if (a - below_v < above_v - a) pick = below;
    else if (a - below_v > above_v - a) pick = below + 1;
    else pick = (below & 1) ? below + 1 : below;
    if (pick > last) pick = f->finite_only ? last : top; /* overflow: saturate or inf */
    return sign | pick;
}

static bool same_value(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void test_decode_every_code(void) {
    for (int k = 0; k < NFORMATS; k++) {
        const format *f = &formats[k];
        int bad = 0;
        for (uint32_t c = 0; c < ncodes(f); c++) {
            double want = ref_decode(f, c), got = f->decode(c);
            if (!same_value(want, got) || (got == 0 && signbit(got) != signbit(want))) {
                if (bad++ < 5) fprintf(stderr, "  %s code 0x%x: got %.9g want %.9g\n", f->name, c, got, want);
            }
        }
        CHECK_MSG(bad == 0, "%s: %d codes decode wrongly", f->name, bad);
    }
}

static void test_round_trip_every_code(void) {
    for (int k = 0; k < NFORMATS; k++) {
        const format *f = &formats[k];
        int bad = 0;
        for (uint32_t c = 0; c < ncodes(f); c++) {
            float v = f->decode(c);
            if (isnan(v)) {
                bad += !isnan(f->decode(f->encode(v))); /* NaN stays NaN */
                continue;
            }
            if (f->encode(v) != c && bad++ < 5) fprintf(stderr, "  %s: 0x%x -> %g -> 0x%x\n", f->name, c, v, f->encode(v));
        }
        CHECK_MSG(bad == 0, "%s: %d codes do not round trip", f->name, bad);
    }
}

static int check_encode(const format *f, float x) {
    uint32_t want = ref_encode(f, x), got = f->encode(x);
    if (want == UINT32_MAX) return !isnan(f->decode(got));
    if (got != want) {
        uint32_t bits;
        memcpy(&bits, &x, sizeof bits);
        fprintf(stderr, "  %s: encode(%.10g = 0x%08x) = 0x%x, want 0x%x\n", f->name, x, bits, got, want);
        return 1;
    }
    return 0;
}

/* Midpoints between neighbours must go to the even code; one f32 ulp off them must not tie. */
static void test_ties_to_even(void) {
    for (int k = 0; k < NFORMATS; k++) {
        const format *f = &formats[k];
        int bad = 0;
        uint32_t last = f->finite_only ? max_finite_code(f) : max_finite_code(f) - 1;
        for (uint32_t c = 0; c <= last && bad < 10; c++) {
            double mid_d = 0.5 * (magnitude_as_finite(f, c) + magnitude_as_finite(f, c + 1));
            float mid = (float)mid_d;
            CHECK(mid == mid_d); /* every midpoint of these formats is exact in f32 */
            float probes[3] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
            for (int p = 0; p < 3; p++) {
                bad += check_encode(f, probes[p]);
                bad += check_encode(f, -probes[p]);
            }
            if ((f->encode(mid) & 1u) != 0) bad++; /* the tie landed on an odd code */
        }
        CHECK_MSG(bad == 0, "%s: %d rounding errors around midpoints", f->name, bad);
    }
}

static void test_random_values(void) {
    cml_rng rng;
    cml_rng_init(&rng, 1234);
    for (int k = 0; k < NFORMATS; k++) {
        const format *f = &formats[k];
        int bad = 0;
        double maxv = magnitude_as_finite(f, max_finite_code(f));
        for (int i = 0; i < 100000 && bad < 10; i++) {
            /* log-uniform over the whole range, from below the subnormals to past overflow */
            double e = -(bias(f) + f->mbits + 2) + (log2(maxv) + 3 + bias(f) + f->mbits) * cml_rng_uniform(&rng);
            float x = (float)pow(2.0, e);
            bad += check_encode(f, (cml_rng_u32(&rng) & 1) ? -x : x);
            uint32_t u = cml_rng_u32(&rng); /* and raw f32 bit patterns */
            float y;
            memcpy(&y, &u, sizeof y);
            bad += check_encode(f, y);
        }
        CHECK_MSG(bad == 0, "%s: %d random values rounded wrongly", f->name, bad);
    }
}

static void test_overflow_and_specials(void) {
    /* f16: 65504 is the max; 65520 is the midpoint to 65536 and ties to even = inf */
    CHECK(cml_f32_to_f16(65504.0f) == 0x7BFF);
    CHECK(cml_f32_to_f16(65519.0f) == 0x7BFF);
    CHECK(cml_f32_to_f16(65520.0f) == 0x7C00);
    CHECK(cml_f32_to_f16(-1e30f) == 0xFC00);
    CHECK(cml_f32_to_bf16(3.3895e38f) == 0x7F7F); /* bf16 max is 3.3895e38 */
    CHECK(cml_f32_to_bf16(3.4e38f) == 0x7F80);  /* past the midpoint to 2^128 */
    CHECK(cml_f32_to_bf16(INFINITY) == 0x7F80);
    /* e4m3fn saturates: 448 max, beyond (and inf) -> 448; NaN stays NaN */
    CHECK(cml_f32_to_f8e4m3(448.0f) == 0x7E);
    CHECK(cml_f32_to_f8e4m3(464.0f) == 0x7E);
    CHECK(cml_f32_to_f8e4m3(1e6f) == 0x7E);
    CHECK(cml_f32_to_f8e4m3(-1e6f) == 0xFE);
    CHECK(cml_f32_to_f8e4m3(INFINITY) == 0x7E);
    CHECK(cml_f8e4m3_to_f32(0x7E) == 448.0f && cml_f8e4m3_to_f32(0xFE) == -448.0f);
    CHECK(isnan(cml_f8e4m3_to_f32(0x7F)) && isnan(cml_f8e4m3_to_f32(0xFF)));
    CHECK((cml_f32_to_f8e4m3(NAN) & 0x7F) == 0x7F);
    /* e5m2: 57344 max; the midpoint 61440 ties to even = inf */
    CHECK(cml_f32_to_f8e5m2(57344.0f) == 0x7B);
    CHECK(cml_f32_to_f8e5m2(61439.0f) == 0x7B);
    CHECK(cml_f32_to_f8e5m2(61440.0f) == 0x7C);
    CHECK(cml_f8e5m2_to_f32(0x7C) == INFINITY && isnan(cml_f8e5m2_to_f32(0x7E)));
    /* NaN in, NaN out for every format */
    CHECK(isnan(cml_f16_to_f32(cml_f32_to_f16(NAN))));
    CHECK(isnan(cml_bf16_to_f32(cml_f32_to_bf16(NAN))));
    CHECK(isnan(cml_bf16_to_f32(cml_f32_to_bf16(-NAN))));
    CHECK(isnan(cml_f8e5m2_to_f32(cml_f32_to_f8e5m2(NAN))));
    /* a NaN whose payload sits in the low bits must not truncate to inf in bf16 */
    uint32_t low_payload = 0x7F800001u;
    float nan_low;
    memcpy(&nan_low, &low_payload, 4);
    CHECK(isnan(cml_bf16_to_f32(cml_f32_to_bf16(nan_low))));
    CHECK(isnan(cml_f16_to_f32(cml_f32_to_f16(nan_low))));
}

static void test_subnormals(void) {
    float tiny = ldexpf(1.0f, -24); /* smallest f16 subnormal */
    CHECK(cml_f32_to_f16(tiny) == 0x0001);
    CHECK(cml_f32_to_f16(tiny * 0.5f) == 0x0000);                      /* tie -> even (0) */
    CHECK(cml_f32_to_f16(nextafterf(tiny * 0.5f, 1.0f)) == 0x0001);
    CHECK(cml_f32_to_f16(tiny * 1.5f) == 0x0002);                      /* tie 1|2 -> 2 */
    CHECK(cml_f32_to_f16(tiny * 2.5f) == 0x0002);                      /* tie 2|3 -> 2 */
    CHECK(cml_f32_to_f16(-tiny * 0.25f) == 0x8000);                    /* -0 keeps its sign */
    CHECK(cml_f32_to_f16(ldexpf(1023.5f, -24)) == 0x0400);            /* rounds up into the first normal */
    CHECK(cml_f16_to_f32(0x03FF) == ldexpf(1023.0f, -24));
    CHECK(cml_f32_to_f8e4m3(ldexpf(1.0f, -9)) == 0x01);               /* e4m3 smallest subnormal 2^-9 */
    CHECK(cml_f32_to_f8e4m3(ldexpf(1.0f, -10)) == 0x00);
    CHECK(cml_f32_to_f8e5m2(ldexpf(3.0f, -17)) == 0x02);              /* 1.5 * 2^-16: tie 1|2 -> 2 */
    uint32_t f32_sub = 0x00000001u;                                    /* smallest f32 subnormal */
    float s;
    memcpy(&s, &f32_sub, 4);
    CHECK(cml_f32_to_bf16(s) == 0x0000);
    f32_sub = 0x00018000u; /* bf16 subnormal 1 plus half an ulp: tie 1|2 -> 2 */
    memcpy(&s, &f32_sub, 4);
    CHECK(cml_f32_to_bf16(s) == 0x0002);
}

static void test_integer_store(void) {
    int32_t i32[8];
    float in32[8] = {2.5f, 3.5f, -2.5f, 1e10f, -1e10f, NAN, 2147483520.0f, -0.4f};
    for (int i = 0; i < 8; i++) cml_dtype_store(i32, CML_I32, i, in32[i]);
    CHECK(i32[0] == 2 && i32[1] == 4 && i32[2] == -2 && i32[3] == INT32_MAX && i32[4] == INT32_MIN);
    CHECK(i32[5] == 0 && i32[6] == 2147483520 && i32[7] == 0);
    int64_t i64[5];
    float in64[5] = {1e19f, -1e19f, 4611686018427387904.0f, -9223372036854775808.0f, INFINITY};
    for (int i = 0; i < 5; i++) cml_dtype_store(i64, CML_I64, i, in64[i]);
    CHECK(i64[0] == INT64_MAX && i64[1] == INT64_MIN && i64[2] == ((int64_t)1 << 62));
    CHECK(i64[3] == INT64_MIN && i64[4] == INT64_MAX);
    uint8_t u8[7];
    float inu[7] = {255.4f, 255.6f, -0.6f, 254.5f, NAN, 1e9f, 0.5f};
    for (int i = 0; i < 7; i++) cml_dtype_store(u8, CML_U8, i, inu[i]);
    CHECK(u8[0] == 255 && u8[1] == 255 && u8[2] == 0 && u8[3] == 254 && u8[4] == 0 && u8[5] == 255 && u8[6] == 0);
    CHECK(cml_dtype_load(u8, CML_U8, 0) == 255.0f);
    CHECK(cml_dtype_load(i32, CML_I32, 4) == -2147483648.0f);
}

static void test_convert(void) {
    enum { N = 1000 };
    float src[N], back[N];
    uint16_t bf[N];
    cml_rng rng;
    cml_rng_init(&rng, 99);
    for (int i = 0; i < N; i++) src[i] = (cml_rng_uniform(&rng) - 0.5f) * 1000.0f;
    cml_dtype_convert(bf, CML_BF16, src, CML_F32, N);
    cml_dtype_convert(back, CML_F32, bf, CML_BF16, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += bf[i] != cml_f32_to_bf16(src[i]) || back[i] != cml_bf16_to_f32(bf[i]);
    CHECK(bad == 0);
    for (int dt = 0; dt < CML_DTYPE_COUNT; dt++) { /* via every dtype and back, element-wise semantics */
        unsigned char tmp[N * 8];
        float out[N];
        cml_dtype_convert(tmp, (cml_dtype)dt, src, CML_F32, N);
        cml_dtype_convert(out, CML_F32, tmp, (cml_dtype)dt, N);
        int wrong = 0;
        for (int i = 0; i < N; i++) {
            unsigned char one[8];
            cml_dtype_store(one, (cml_dtype)dt, 0, src[i]);
            wrong += out[i] != cml_dtype_load(one, (cml_dtype)dt, 0);
        }
        CHECK_MSG(wrong == 0, "convert via %s: %d wrong", cml_dtype_name((cml_dtype)dt), wrong);
    }
    int64_t big[3] = {((int64_t)1 << 53) + 1, INT64_MAX, -5}, big_out[3];
    int32_t small[3];
    cml_dtype_convert(big_out, CML_I64, big, CML_I64, 3);
    CHECK(memcmp(big, big_out, sizeof big) == 0);
    cml_dtype_convert(small, CML_I32, big, CML_I64, 3);
    CHECK(small[0] == INT32_MAX && small[1] == INT32_MAX && small[2] == -5);
    cml_dtype_convert(big_out, CML_I64, small, CML_I32, 3);
    CHECK(big_out[0] == INT32_MAX && big_out[2] == -5);
}

static void test_names_and_sizes(void) {
    static const size_t sizes[CML_DTYPE_COUNT] = {4, 2, 2, 1, 1, 4, 8, 1};
    static const char *names[CML_DTYPE_COUNT] = {"f32", "f16", "bf16", "f8e4m3", "f8e5m2", "i32", "i64", "u8"};
    for (int dt = 0; dt < CML_DTYPE_COUNT; dt++) {
        CHECK(cml_dtype_size((cml_dtype)dt) == sizes[dt]);
        CHECK(strcmp(cml_dtype_name((cml_dtype)dt), names[dt]) == 0);
        CHECK(cml_dtype_valid((cml_dtype)dt));
        CHECK(cml_dtype_is_float((cml_dtype)dt) == (dt <= CML_F8E5M2));
    }
    CHECK(!cml_dtype_valid(CML_DTYPE_COUNT) && !cml_dtype_valid((cml_dtype)-1));
    CHECK(cml_dtype_size(CML_DTYPE_COUNT) == 0 && strcmp(cml_dtype_name(CML_DTYPE_COUNT), "?") == 0);
}

int main(void) {
    RUN(test_decode_every_code);
    RUN(test_round_trip_every_code);
    RUN(test_ties_to_even);
    RUN(test_random_values);
    RUN(test_overflow_and_specials);
    RUN(test_subnormals);
    RUN(test_integer_store);
    RUN(test_convert);
    RUN(test_names_and_sizes);
    return th_finish();
}
