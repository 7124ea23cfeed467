/* Internal: setting errors and checking statuses. */
#ifndef CML_RUNTIME_ERROR_H
#define CML_RUNTIME_ERROR_H

#include "camel/status.h"

#if defined(__GNUC__)
#define CML__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CML__PRINTF(a, b)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Records status s with a printf-style message on this thread and returns s. */
cml_status cml__error(cml_status s, const char *fmt, ...) CML__PRINTF(2, 3);

#ifdef __cplusplus
}
#endif

/* Returns from the enclosing function when expr fails (the error is already set). */
#define CML_TRY(expr)                        \
    do {                                     \
        cml_status cml__s = (expr);          \
        if (cml__s != CML_OK) return cml__s; \
    } while (0)

/* An internal invariant: on failure records CML_ERR_INTERNAL and returns it. */
#define CML_ASSERT(cond)                                                                    \
    do {                                                                                    \
        if (!(cond))                                                                        \
            return cml__error(CML_ERR_INTERNAL, "internal error: %s (%s:%d)", #cond, __FILE__, \
                              __LINE__);                                                    \
    } while (0)

/* Argument checks for public functions: record and return CML_ERR_INVALID_ARG. */
#define CML_CHECK_ARG(cond, ...)                                        \
    do {                                                                \
        if (!(cond)) return cml__error(CML_ERR_INVALID_ARG, __VA_ARGS__); \
    } while (0)

#endif
