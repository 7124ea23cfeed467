/* Internal: argument checks shared by the public kernel entry points.
 *
 * Each public kernel validates everything before dispatching, so that the
 * backends can assume well-formed input. Messages name the function, the
 * argument and what was expected. */
#ifndef CML_KERNELS_KERNEL_CHECK_H
#define CML_KERNELS_KERNEL_CHECK_H

#include "camel/kernels.h"
#include "runtime/error.h"

/* Returns from the caller with CML_ERR_INVALID_ARG when ptr is NULL. */
#define CML__CHECK_NOT_NULL(fn, ptr) CML_CHECK_ARG((ptr) != NULL, "%s: %s must not be NULL", fn, #ptr)

/* The error for a valid call on a device that has no implementation of the kernel yet.
 * Public kernels validate everything first, then dispatch on the device. */
static inline cml_status cml__no_device_impl(const char *fn, const cml_ctx *ctx) {
    return cml__error(CML_ERR_UNSUPPORTED, "%s has no CUDA implementation yet (ctx is on %s)", fn,
                      cml_device_name(cml_ctx_device(ctx)));
}

static inline cml_status cml__check_dtype_valid(const char *fn, const char *arg, cml_dtype dt) {
    if (!cml_dtype_valid(dt))
        return cml__error(CML_ERR_DTYPE, "%s: %s=%d is not a valid dtype", fn, arg, (int)dt);
    return CML_OK;
}

/* dt must be one of the floating-point storage types. */
static inline cml_status cml__check_dtype_float(const char *fn, const char *arg, cml_dtype dt) {
    CML_TRY(cml__check_dtype_valid(fn, arg, dt));
    if (!cml_dtype_is_float(dt))
        return cml__error(CML_ERR_DTYPE, "%s: %s=%s must be a floating-point dtype (f32, f16, bf16, f8e4m3, f8e5m2)",
                          fn, arg, cml_dtype_name(dt));
    return CML_OK;
}

static inline cml_status cml__check_size(const char *fn, const char *arg, int64_t v, int64_t min) {
    if (v < min) return cml__error(CML_ERR_INVALID_ARG, "%s: %s=%lld must be >= %lld", fn, arg, (long long)v, (long long)min);
    return CML_OK;
}

/* a * b * ... must not overflow int64 (sizes are already known >= 0). */
static inline cml_status cml__check_product(const char *fn, int64_t a, int64_t b, int64_t c) {
    if (a && b && (b > INT64_MAX / a || (c && a * b > INT64_MAX / c)))
        return cml__error(CML_ERR_INVALID_ARG, "%s: sizes %lld x %lld x %lld overflow int64", fn,
                          (long long)a, (long long)b, (long long)c);
    return CML_OK;
}

#endif
