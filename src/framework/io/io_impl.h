/* Internal: atomic file writes and the safetensors writer, shared by
 * safetensors.c and checkpoint.c. */
#ifndef CML_FRAMEWORK_IO_IMPL_H
#define CML_FRAMEWORK_IO_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "camel/io.h"

/* A file written under a temporary name ("<path>.tmp.<pid>", same directory)
 * and renamed over path only when complete:
 *   cml__atomic_begin   opens the temporary file;
 *   cml__atomic_write   appends bytes (sticky: after a failure the rest are ignored);
 *   cml__atomic_finish  flushes, fsyncs and closes it (complete, not yet visible);
 *   cml__atomic_commit  renames it over path and fsyncs the directory;
 *   cml__atomic_abort   removes the temporary file (safe after any step, and twice).
 * Every failure is CML_ERR_IO naming `who`, the path and strerror; on failure
 * the caller calls cml__atomic_abort, which leaves any previous file at path intact. */
typedef struct cml__atomic_file {
    const char *who;
    char *path;
    char *tmp;
    FILE *fp;
    bool failed;    /* a write failed; finish reports it */
    int error;      /* errno of that failure */
    bool committed; /* renamed: nothing left to remove */
} cml__atomic_file;

cml_status cml__atomic_begin(cml__atomic_file *f, const char *who, const char *path);
void cml__atomic_write(cml__atomic_file *f, const void *data, size_t n);
cml_status cml__atomic_finish(cml__atomic_file *f);
cml_status cml__atomic_commit(cml__atomic_file *f);
void cml__atomic_abort(cml__atomic_file *f);

/* Writes a whole safetensors file into f (begun, not finished): validates the
 * arguments as cml_safetensors_save documents (errors name `who`). */
cml_status cml__safetensors_write(cml__atomic_file *f, const char *who, const cml_named_tensor *tensors, int n,
                                  const char *const *meta_keys, const char *const *meta_values, int n_meta);

/* The raw little-endian bytes of a named entry of an open file (borrowed, valid
 * until cml_safetensors_close) with its dtype and shape, or NULL when absent. */
const void *cml__safetensors_entry(const cml_safetensors *f, const char *name, cml_dtype *dtype, int *ndim,
                                   const int64_t **shape, size_t *nbytes);

#define CML__ST_MAX_HEADER 100000000ull /* the Python library's limit on the header's size */

/* The safetensors name of a dtype ("F32", "BF16", ...). */
const char *cml__st_dtype_name(cml_dtype dt);

/* A growable byte buffer, kept NUL-terminated; oom is sticky (later puts are ignored). */
typedef struct cml__sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} cml__sbuf;

void cml__sb_put(cml__sbuf *b, const void *s, size_t n);

/* The first name that occurs twice among names[0..n), or NULL; *oom is set when
 * the check could not allocate. */
const char *cml__find_duplicate(const char *const *names, int n, bool *oom);

/* Whether s[0..n) is valid UTF-8 (no overlong forms, surrogates or code points above U+10FFFF). */
bool cml__utf8_valid(const char *s, size_t n);

#endif
