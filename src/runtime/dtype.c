/* Element types: sizes, names and scalar conversions.
 *
 * Every narrow float format (f16, bf16, e4m3fn, e5m2) is encoded by one
 * routine, encode_small_float(), parameterized by exponent/mantissa widths, so
 * that rounding (nearest, ties to even, subnormals included) is written once.
 */
#include <math.h>
#include <string.h>

#include "camel/dtype.h"

size_t cml_dtype_size(cml_dtype dt) {
    switch (dt) {
    case CML_F32: return 4;
    case CML_F16: return 2;
    case CML_BF16: return 2;
    case CML_F8E4M3: return 1;
    case CML_F8E5M2: return 1;
    case CML_I32: return 4;
    case CML_I64: return 8;
    case CML_U8: return 1;
    default: return 0;
    }
}

const char *cml_dtype_name(cml_dtype dt) {
    switch (dt) {
    case CML_F32: return "f32";
    case CML_F16: return "f16";
    case CML_BF16: return "bf16";
    case CML_F8E4M3: return "f8e4m3";
    case CML_F8E5M2: return "f8e5m2";
    case CML_I32: return "i32";
    case CML_I64: return "i64";
    case CML_U8: return "u8";
    default: return "?";
    }
}

bool cml_dtype_valid(cml_dtype dt) { return (int)dt >= 0 && dt < CML_DTYPE_COUNT; }

bool cml_dtype_is_float(cml_dtype dt) {
    return dt == CML_F32 || dt == CML_F16 || dt == CML_BF16 || dt == CML_F8E4M3 || dt == CML_F8E5M2;
}

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* A narrow binary float format: 1 sign bit, ebits exponent bits, mbits mantissa bits. */
typedef struct small_float_format {
    int ebits, mbits;
    bool has_inf;        /* IEEE-style: all-ones exponent is inf (mantissa 0) or NaN */
    uint32_t nan_code;   /* the quiet NaN we produce, without the sign */
    uint32_t max_finite; /* largest finite code, without the sign */
} small_float_format;

static const small_float_format fmt_f16 = {5, 10, true, 0x7E00u, 0x7BFFu};
static const small_float_format fmt_e4m3 = {4, 3, false, 0x7Fu, 0x7Eu};
static const small_float_format fmt_e5m2 = {5, 2, true, 0x7Eu, 0x7Bu};

/* sig >> shift rounded to nearest, ties to even (shift in [0, 31]). */
static uint32_t shift_right_rne(uint32_t sig, int shift) {
    if (shift <= 0) return sig;
    if (shift > 25) return 0; /* sig < 2^24 <= half of 2^shift: rounds to 0 */
    uint32_t q = sig >> shift;
    uint32_t rem = sig & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return q;
}

/* f32 -> narrow code, RNE. Values beyond the largest finite number become
 * inf for formats that have it and saturate to max_finite otherwise (e4m3fn
 * has no inf: +-inf also saturates, like CUDA's satfinite conversion). */
static uint32_t encode_small_float(float x, const small_float_format *f) {
    uint32_t u = f32_bits(x);
    uint32_t sign = (u >> 31) << (f->ebits + f->mbits);
    uint32_t exp_field = (u >> 23) & 0xFFu;
    uint32_t mant = u & 0x7FFFFFu;
    uint32_t inf_code = ((1u << f->ebits) - 1u) << f->mbits;
    if (exp_field == 0xFFu) {
        if (mant != 0) return sign | f->nan_code;
        return sign | (f->has_inf ? inf_code : f->max_finite);
    }
    /* value = sig * 2^(e - 23), with sig holding the implicit bit for normals */
    int e = exp_field ? (int)exp_field - 127 : -126;
    uint32_t sig = exp_field ? (mant | 0x800000u) : mant;
    if (sig == 0) return sign;
    int bias = (1 << (f->ebits - 1)) - 1;
    int emin = 1 - bias; /* exponent of the smallest normal */
    int shift = 23 - f->mbits + (e < emin ? emin - e : 0);
    uint32_t r = shift_right_rne(sig, shift);
    uint32_t code;
    if (e < emin) {
        code = r; /* subnormal; r == 2^mbits is the smallest normal, which this encodes */
    } else {
        /* r is in [2^mbits, 2^(mbits+1)]: adding it carries into the exponent when rounding up */
        int64_t biased = (int64_t)e + bias - 1;
        if (biased >= (int64_t)(1u << f->ebits)) return sign | (f->has_inf ? inf_code : f->max_finite);
        code = ((uint32_t)biased << f->mbits) + r;
    }
    if (f->has_inf) {
        if (code >= inf_code) code = inf_code;
    } else if (code > f->max_finite) {
        code = f->max_finite;
    }
    return sign | code;
}

static float decode_small_float(uint32_t code, const small_float_format *f) {
    int nbits = 1 + f->ebits + f->mbits;
    bool negative = (code >> (nbits - 1)) & 1u;
    uint32_t exp_field = (code >> f->mbits) & ((1u << f->ebits) - 1u);
    uint32_t mant = code & ((1u << f->mbits) - 1u);
    uint32_t magnitude = code & ((1u << (nbits - 1)) - 1u);
    int bias = (1 << (f->ebits - 1)) - 1;
    float v;
    if (f->has_inf && exp_field == (1u << f->ebits) - 1u) {
        v = mant ? NAN : INFINITY;
    } else if (!f->has_inf && magnitude == ((1u << (nbits - 1)) - 1u)) {
        v = NAN; /* e4m3fn: S.1111.111 is the only NaN */
    } else if (exp_field == 0) {
        v = ldexpf((float)mant, 1 - bias - f->mbits);
    } else {
        v = ldexpf((float)(mant | (1u << f->mbits)), (int)exp_field - bias - f->mbits);
    }
    return negative ? -v : v;
}

uint16_t cml_f32_to_f16(float x) { return (uint16_t)encode_small_float(x, &fmt_f16); }

float cml_f16_to_f32(uint16_t h) {
    /* Built from bits (fast path used by every f16 load). */
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp_field = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp_field == 0x1F) return bits_f32(sign | 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0));
    if (exp_field == 0) {
        float v = (float)mant * (1.0f / 16777216.0f); /* mant * 2^-24, exact */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp_field + 112u) << 23) | (mant << 13));
}

uint16_t cml_f32_to_bf16(float x) {
    uint32_t u = f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    /* Adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to even;
     * a carry out of the mantissa correctly bumps the exponent (up to inf). */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float cml_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint8_t cml_f32_to_f8e4m3(float x) { return (uint8_t)encode_small_float(x, &fmt_e4m3); }
float cml_f8e4m3_to_f32(uint8_t v) { return decode_small_float(v, &fmt_e4m3); }
uint8_t cml_f32_to_f8e5m2(float x) { return (uint8_t)encode_small_float(x, &fmt_e5m2); }
float cml_f8e5m2_to_f32(uint8_t v) { return decode_small_float(v, &fmt_e5m2); }

/* ---- integers: round to nearest (ties to even), saturate, NaN -> 0 ------------ */

static int64_t float_to_i64_sat(float v) {
    if (v != v) return 0;
    float r = rintf(v);
    if (r >= 9223372036854775808.0f) return INT64_MAX;
    if (r <= -9223372036854775808.0f) return INT64_MIN;
    return (int64_t)r;
}

static int32_t float_to_i32_sat(float v) {
    if (v != v) return 0;
    float r = rintf(v);
    if (r >= 2147483648.0f) return INT32_MAX;
    if (r <= -2147483648.0f) return INT32_MIN;
    return (int32_t)r;
}

static uint8_t float_to_u8_sat(float v) {
    if (v != v) return 0;
    float r = rintf(v);
    if (r <= 0.0f) return 0;
    if (r >= 255.0f) return 255;
    return (uint8_t)r;
}

float cml_dtype_load(const void *base, cml_dtype dt, int64_t i) {
    switch (dt) {
    case CML_F32: return ((const float *)base)[i];
    case CML_F16: return cml_f16_to_f32(((const uint16_t *)base)[i]);
    case CML_BF16: return cml_bf16_to_f32(((const uint16_t *)base)[i]);
    case CML_F8E4M3: return cml_f8e4m3_to_f32(((const uint8_t *)base)[i]);
    case CML_F8E5M2: return cml_f8e5m2_to_f32(((const uint8_t *)base)[i]);
    case CML_I32: return (float)((const int32_t *)base)[i];
    case CML_I64: return (float)((const int64_t *)base)[i];
    case CML_U8: return (float)((const uint8_t *)base)[i];
    default: return NAN;
    }
}

void cml_dtype_store(void *base, cml_dtype dt, int64_t i, float v) {
    switch (dt) {
    case CML_F32: ((float *)base)[i] = v; break;
    case CML_F16: ((uint16_t *)base)[i] = cml_f32_to_f16(v); break;
    case CML_BF16: ((uint16_t *)base)[i] = cml_f32_to_bf16(v); break;
    case CML_F8E4M3: ((uint8_t *)base)[i] = cml_f32_to_f8e4m3(v); break;
    case CML_F8E5M2: ((uint8_t *)base)[i] = cml_f32_to_f8e5m2(v); break;
    case CML_I32: ((int32_t *)base)[i] = float_to_i32_sat(v); break;
    case CML_I64: ((int64_t *)base)[i] = float_to_i64_sat(v); break;
    case CML_U8: ((uint8_t *)base)[i] = float_to_u8_sat(v); break;
    default: break;
    }
}

static bool dtype_is_int(cml_dtype dt) { return dt == CML_I32 || dt == CML_I64 || dt == CML_U8; }

static int64_t load_int(const void *base, cml_dtype dt, int64_t i) {
    switch (dt) {
    case CML_I32: return ((const int32_t *)base)[i];
    case CML_I64: return ((const int64_t *)base)[i];
    default: return ((const uint8_t *)base)[i];
    }
}

static void store_int_sat(void *base, cml_dtype dt, int64_t i, int64_t v) {
    switch (dt) {
    case CML_I32:
        ((int32_t *)base)[i] = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
        break;
    case CML_I64: ((int64_t *)base)[i] = v; break;
    default: ((uint8_t *)base)[i] = v > 255 ? 255 : v < 0 ? 0 : (uint8_t)v; break;
    }
}

void cml_dtype_convert(void *dst, cml_dtype dst_dt, const void *src, cml_dtype src_dt, int64_t n) {
    if (n <= 0 || !cml_dtype_valid(dst_dt) || !cml_dtype_valid(src_dt)) return;
    if (dst_dt == src_dt) {
        memmove(dst, src, (size_t)n * cml_dtype_size(dst_dt));
        return;
    }
    /* Integer to integer stays in integers, so that large i64 values are exact. */
    if (dtype_is_int(dst_dt) && dtype_is_int(src_dt)) {
        for (int64_t i = 0; i < n; i++) store_int_sat(dst, dst_dt, i, load_int(src, src_dt, i));
        return;
    }
    if (src_dt == CML_F32 && dst_dt == CML_BF16) {
        const float *s = src;
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = cml_f32_to_bf16(s[i]);
        return;
    }
    if (src_dt == CML_BF16 && dst_dt == CML_F32) {
        const uint16_t *s = src;
        float *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = cml_bf16_to_f32(s[i]);
        return;
    }
    for (int64_t i = 0; i < n; i++) cml_dtype_store(dst, dst_dt, i, cml_dtype_load(src, src_dt, i));
}
