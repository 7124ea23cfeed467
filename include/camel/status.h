/* Status codes and error messages.
 *
 * Every library function that can fail returns a cml_status (kernel layer)
 * or NULL (framework functions that return a new tensor/object) and leaves a
 * message in a thread-local buffer that names the function, the argument and
 * what was expected, e.g. "cml_gemm: lda=100 must be >= K=128".
 */
#ifndef CAMEL_STATUS_H
#define CAMEL_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cml_status {
    CML_OK = 0,
    CML_ERR_INVALID_ARG,  /* a bad value: NULL pointer, negative size, unknown enum */
    CML_ERR_SHAPE,        /* shapes do not fit together */
    CML_ERR_DTYPE,        /* the dtype is not supported by this operation */
    CML_ERR_UNSUPPORTED,  /* valid, but not implemented for this device/configuration */
    CML_ERR_OOM,          /* an allocation failed */
    CML_ERR_CUDA,         /* a CUDA call failed, or CUDA is not available */
    CML_ERR_IO,           /* a file could not be opened, read or written */
    CML_ERR_CORRUPT,      /* a file's contents are malformed or truncated */
    CML_ERR_STATE,        /* the call is not allowed in the current state (e.g. backward twice) */
    CML_ERR_INTERNAL      /* a broken internal invariant: a bug in camel */
} cml_status;

/* The message of the last failure on this thread ("" when none). The pointer
 * stays valid until the next failing call on this thread. */
const char *cml_last_error(void);

/* The status of the last failure on this thread (CML_OK when none). */
cml_status cml_last_status(void);

/* Clears the last error of this thread. */
void cml_clear_error(void);

/* A short constant name for a status ("CML_ERR_SHAPE"). */
const char *cml_status_name(cml_status s);

#ifdef __cplusplus
}
#endif
#endif
