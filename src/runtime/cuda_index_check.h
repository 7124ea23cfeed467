/* Internal: deferred reports of bad device-resident indices on CUDA contexts.
 *
 * Kernel calls whose index arguments live on the device (cross-entropy
 * targets, index_select / gather indices, max-pool argmax indices) cannot
 * check them before launching without waiting for the stream. Instead, as
 * CUDA reports asynchronous errors, such a call registers itself here
 * (cml__index_check_begin: a host record of the function, the index buffer,
 * the valid range), its kernels skip every bad index and record the lowest bad
 * flat position in the context's device word, and the call returns CML_OK
 * without waiting. The next call that waits for the stream
 * (cml_ctx_synchronize, a synchronous cml__cuda_memcpy) reports the error
 * with the call's own message and clears it (cml__index_check_report).
 *
 * The device word holds (call number << 40 | position), lowered by an integer
 * atomicMin, so it ends as the first bad call's lowest bad position whatever
 * the order of the threads: several bad calls since the last check report the
 * first of them. The call number counts the calls registered since the last
 * check; the first CML__INDEX_CALLS of them have exact records, the later ones
 * share the last number (the message then says that the position may belong
 * to any of them). A word of mapped pinned host memory, set by any kernel that
 * flags, lets a check with no error cost nothing beyond its stream wait.
 *
 * With CML_SYNC_CHECKS=1 in the environment when a context is created, its
 * calls check at once (cml__index_check_end waits for the stream) and return
 * the error themselves, as the CPU does. */
#ifndef CML_RUNTIME_CUDA_INDEX_CHECK_H
#define CML_RUNTIME_CUDA_INDEX_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "camel/runtime.h"

/* Calls with an exact record between two checks; later ones share the last call number. */
#define CML__INDEX_CALLS 256
/* Positions take the low 40 bits of the device word (index arrays of up to 2^40 elements). */
#define CML__INDEX_POS_BITS 40
#define CML__INDEX_NO_BAD 0xFFFFFFFFFFFFFFFFull

/* What a kernel needs to flag a bad index: passed by value to kernels. */
typedef struct cml__index_flag {
    unsigned long long *word; /* device: the lowest (call << 40 | position) flagged */
    unsigned *seen;           /* device address of a mapped host word set on a flag; NULL without mapped memory */
    unsigned long long call;  /* this call's number << 40 */
} cml__index_flag;

/* What the report needs to say about one call (strings must be static). */
typedef struct cml__index_call {
    const char *fn;         /* the public function, e.g. "cml_cross_entropy_fwd" */
    const char *arg;        /* the index argument, e.g. "targets" */
    const int64_t *idx;     /* the caller's device buffer: the bad value is read from it at report time */
    int64_t bound;          /* valid values are [0, bound) */
    const char *bound_name; /* how the message names the bound: "n_src=", "H*W=" or "" */
    bool has_ignore;        /* ... or equal to ignore (cross-entropy's ignore_index) */
    int64_t ignore;
} cml__index_call;

#ifdef __cplusplus
extern "C" {
#endif

/* Set-up and tear-down with the CUDA context (cuda_backend.c): reads CML_SYNC_CHECKS; the
 * device word and the mapped host word are allocated by the first registered call. An error
 * still pending when the context is destroyed is dropped. */
cml_status cml__index_check_init(cml_ctx *ctx);
void cml__index_check_fini(cml_ctx *ctx);

/* Registers a call that will check `positions` indices on ctx's stream and fills the flag its
 * kernels get (resetting the device word on the stream first if the last check found an error). */
cml_status cml__index_check_begin(cml_ctx *ctx, const cml__index_call *call, int64_t positions,
                                  cml__index_flag *flag);

/* The registered call's last step: CML_OK at once, or with CML_SYNC_CHECKS=1 waits for the
 * stream and returns the error of this call (fn names it should the wait itself fail). */
cml_status cml__index_check_end(cml_ctx *ctx, const char *fn);

/* After a wait for ctx's stream: reports (once) the first bad index flagged since the last check,
 * as CML_ERR_INVALID_ARG with the flagging call's message; `reporter` names the waiting call. */
cml_status cml__index_check_report(cml_ctx *ctx, const char *reporter);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
/* Records the bad index at flat position pos of the flag's call. */
static __device__ __forceinline__ void cml__index_flag_bad(cml__index_flag f, long long pos) {
    atomicMin(f.word, f.call | (unsigned long long)pos);
    if (f.seen) *(volatile unsigned *)f.seen = 1u; /* every writer stores the same value */
}
#endif

#endif
