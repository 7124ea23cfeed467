/* CPU copy (with dtype conversion), fill and where.
 *
 * These move elements rather than compute on them, so same-dtype work copies
 * raw element bytes (exact for every dtype, NaN payloads included) and
 * integer-to-integer conversions stay in int64 (exact for large i64 values);
 * only conversions involving a float type go through f32. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"

/* dst[i*ds] = src[i*ss] for elements of elem_size bytes (offsets/strides in elements). */
static void copy_elements(char *dst, int64_t ds, const char *src, int64_t ss, size_t elem_size, int64_t n) {
    if (ds == 1 && ss == 1) {
        memcpy(dst, src, (size_t)n * elem_size);
        return;
    }
    switch (elem_size) {
    case 1: for (int64_t i = 0; i < n; i++) ((uint8_t *)dst)[i * ds] = ((const uint8_t *)src)[i * ss]; break;
    case 2: for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i * ds] = ((const uint16_t *)src)[i * ss]; break;
    case 4: for (int64_t i = 0; i < n; i++) ((uint32_t *)dst)[i * ds] = ((const uint32_t *)src)[i * ss]; break;
    default: for (int64_t i = 0; i < n; i++) ((uint64_t *)dst)[i * ds] = ((const uint64_t *)src)[i * ss]; break;
    }
}

/* ---- copy ------------------------------------------------------------------------ */

typedef struct copy_job {
    void *y;
    const void *x;
    cml_dtype y_dtype, x_dtype;
} copy_job;

static void copy_same_piece(void *job_ptr, const int64_t *offset, const int64_t *stride, int64_t len) {
    const copy_job *job = job_ptr;
    size_t es = cml_dtype_size(job->y_dtype);
    copy_elements((char *)job->y + offset[0] * (int64_t)es, stride[0],
                  (const char *)job->x + offset[1] * (int64_t)es, stride[1], es, len);
}

static void copy_int_piece(void *job_ptr, const int64_t *offset, const int64_t *stride, int64_t len) {
    const copy_job *job = job_ptr;
    int64_t buf[CML__EW_PIECE];
    cml__load_i64(buf, job->x, job->x_dtype, offset[1], stride[1], len);
    cml__store_i64(job->y, job->y_dtype, offset[0], stride[0], buf, len);
}

static void copy_convert_piece(void *job_ptr, const int64_t *offset, const int64_t *stride, int64_t len) {
    const copy_job *job = job_ptr;
    float buf[CML__EW_PIECE];
    const float *x = cml__f32_view(buf, job->x, job->x_dtype, offset[1], stride[1], len);
    cml__store_f32(job->y, job->y_dtype, offset[0], stride[0], x, len);
}

cml_status cml__copy_cpu(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                         const void *x, const cml_layout *x_layout, cml_dtype x_dtype) {
    const cml_layout *layouts[2] = {y_layout, x_layout};
    cml__ew_iter it;
    cml__ew_iter_init(&it, 2, layouts);
    copy_job job = {y, x, y_dtype, x_dtype};
    cml__ew_piece_fn fn = copy_convert_piece;
    if (y_dtype == x_dtype) fn = copy_same_piece;
    else if (cml__dtype_is_int(y_dtype) && cml__dtype_is_int(x_dtype)) fn = copy_int_piece;
    cml__ew_for_each_piece(&it, fn, &job);
    return CML_OK;
}

/* ---- fill ------------------------------------------------------------------------- */

typedef struct fill_job {
    void *y;
    size_t elem_size;
    unsigned char value[8]; /* the encoded element */
} fill_job;

static void fill_piece(void *job_ptr, const int64_t *offset, const int64_t *stride, int64_t len) {
    const fill_job *job = job_ptr;
    int64_t s = stride[0];
    switch (job->elem_size) {
    case 1: {
        uint8_t *p = (uint8_t *)job->y + offset[0];
        if (s == 1) memset(p, job->value[0], (size_t)len);
        else for (int64_t i = 0; i < len; i++) p[i * s] = job->value[0];
        break;
    }
    case 2: {
        uint16_t v, *p = (uint16_t *)job->y + offset[0];
        memcpy(&v, job->value, 2);
        for (int64_t i = 0; i < len; i++) p[i * s] = v;
        break;
    }
    case 4: {
        uint32_t v, *p = (uint32_t *)job->y + offset[0];
        memcpy(&v, job->value, 4);
        for (int64_t i = 0; i < len; i++) p[i * s] = v;
        break;
    }
    default: {
        uint64_t v, *p = (uint64_t *)job->y + offset[0];
        memcpy(&v, job->value, 8);
        for (int64_t i = 0; i < len; i++) p[i * s] = v;
        break;
    }
    }
}

/* double -> int64, rounded to nearest (ties to even) and saturated; NaN -> 0.
 * Straight from double so that e.g. 2^40 + 1 fills an i64 exactly. */
static int64_t double_to_i64_sat(double v) {
    if (v != v) return 0;
    double r = nearbyint(v);
    if (r >= 9223372036854775808.0) return INT64_MAX;
    if (r <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)r;
}

cml_status cml__fill_cpu(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype dtype, double value) {
    const cml_layout *layouts[1] = {y_layout};
    cml__ew_iter it;
    cml__ew_iter_init(&it, 1, layouts);
    fill_job job = {y, cml_dtype_size(dtype), {0}};
    if (cml__dtype_is_int(dtype)) {
        int64_t v = double_to_i64_sat(value);
        cml__store_i64(job.value, dtype, 0, 1, &v, 1);
    } else {
        cml_dtype_store(job.value, dtype, 0, (float)value);
    }
    cml__ew_for_each_piece(&it, fill_piece, &job);
    return CML_OK;
}

/* ---- where ------------------------------------------------------------------------- */

typedef struct where_job {
    void *y;
    const uint8_t *cond;
    const void *a, *b;
    size_t elem_size;
} where_job;

static void where_piece(void *job_ptr, const int64_t *offset, const int64_t *stride, int64_t len) {
    const where_job *job = job_ptr;
    const uint8_t *c = job->cond + offset[1];
    int64_t ys = stride[0], cs = stride[1], as = stride[2], bs = stride[3];
    switch (job->elem_size) {
#define WHERE_CASE(bytes, T)                                                               \
    case bytes: {                                                                          \
        T *y = (T *)job->y + offset[0];                                                    \
        const T *a = (const T *)job->a + offset[2], *b = (const T *)job->b + offset[3];    \
        for (int64_t i = 0; i < len; i++) y[i * ys] = c[i * cs] ? a[i * as] : b[i * bs];   \
        break;                                                                             \
    }
        WHERE_CASE(1, uint8_t)
        WHERE_CASE(2, uint16_t)
        WHERE_CASE(4, uint32_t)
        WHERE_CASE(8, uint64_t)
#undef WHERE_CASE
    default: break;
    }
}

cml_status cml__where_fwd_cpu(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype dtype,
                              const uint8_t *cond, const cml_layout *cond_layout,
                              const void *a, const cml_layout *a_layout,
                              const void *b, const cml_layout *b_layout) {
    const cml_layout *layouts[4] = {y_layout, cond_layout, a_layout, b_layout};
    cml__ew_iter it;
    cml__ew_iter_init(&it, 4, layouts);
    where_job job = {y, cond, a, b, cml_dtype_size(dtype)};
    cml__ew_for_each_piece(&it, where_piece, &job);
    return CML_OK;
}
