/* Writing safetensors files: the header JSON as the Python library writes it
 * (compact, "__metadata__" first, space padding to 8 bytes), then the tensors
 * row-major in the caller's order, through an atomic file. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/autograd.h"
#include "framework/io/io_impl.h"
#include "framework/tensor_impl.h"

static void sb_str(cml__sbuf *b, const char *s) { cml__sb_put(b, s, strlen(s)); }

/* A JSON string with serde_json's escapes (what the Python library writes). */
static void sb_json(cml__sbuf *b, const char *s) {
    cml__sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f"
                        : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        char u[8];
        if (!esc && c < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", c);
            esc = u;
        }
        if (esc)
            sb_str(b, esc);
        else
            cml__sb_put(b, s, 1);
    }
    cml__sb_put(b, "\"", 1);
}
/* ---- writing ----------------------------------------------------------------------------- */

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first duplicate among n strings, or NULL. */
const char *cml__find_duplicate(const char *const *names, int n, bool *oom) {
    *oom = false;
    if (n < 2) return NULL;
    const char **sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) {
        *oom = true;
        return NULL;
    }
    memcpy(sorted, names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str_ptr);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) dup = sorted[i];
    free(sorted);
    return dup;
}

static cml_status check_strings(const char *who, const char *what, const char *const *s, int n) {
    for (int i = 0; i < n; i++) {
        CML_CHECK_ARG(s[i], "%s: %s %d is NULL", who, what, i);
        CML_CHECK_ARG(cml__utf8_valid(s[i], strlen(s[i])), "%s: %s %d (\"%s\") is not valid UTF-8", who, what, i, s[i]);
    }
    bool oom;
    const char *dup = cml__find_duplicate(s, n, &oom);
    if (oom) return cml__error(CML_ERR_OOM, "%s: out of memory checking %ss", who, what);
    CML_CHECK_ARG(!dup, "%s: %s \"%s\" appears twice (they must be unique)", who, what, dup ? dup : "");
    return CML_OK;
}

/* Validates the arguments and builds the padded header JSON into *hdr. */
static cml_status build_header(const char *who, const cml_named_tensor *tensors, int n, const char *const *keys,
                               const char *const *values, int n_meta, cml__sbuf *hdr) {
    CML_CHECK_ARG(n >= 0 && (n == 0 || tensors), "%s: n=%d must be >= 0 and tensors not NULL when n > 0", who, n);
    CML_CHECK_ARG(n_meta >= 0 && (n_meta == 0 || (keys && values)),
                  "%s: n_meta=%d must be >= 0 and meta_keys, meta_values not NULL when n_meta > 0", who, n_meta);
    for (int i = 0; i < n; i++) {
        const char *name = tensors[i].name;
        CML_CHECK_ARG(name && name[0], "%s: tensor %d has a NULL or empty name", who, i);
        CML_CHECK_ARG(strcmp(name, "__metadata__") != 0, "%s: tensor %d may not be named \"__metadata__\"", who, i);
        CML_CHECK_ARG(tensors[i].tensor, "%s: tensor %d (\"%s\") is NULL", who, i, name);
        CML_CHECK_ARG(cml__st_dtype_name(tensors[i].tensor->dtype), "%s: tensor %d (\"%s\") has an invalid dtype", who, i,
                      name);
    }
    const char **names = malloc((size_t)(n > 0 ? n : 1) * sizeof *names);
    if (!names) return cml__error(CML_ERR_OOM, "%s: out of memory", who);
    for (int i = 0; i < n; i++) names[i] = tensors[i].name;
    cml_status s = check_strings(who, "tensor name", names, n);
    free(names);
    CML_TRY(s);
    CML_TRY(check_strings(who, "metadata key", keys, n_meta));
    for (int i = 0; i < n_meta; i++)
        CML_TRY(check_strings(who, "metadata value", values + i, 1));

    char num[64];
    cml__sb_put(hdr, "{", 1);
    if (n_meta > 0) {
        sb_str(hdr, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) cml__sb_put(hdr, ",", 1);
            sb_json(hdr, keys[i]);
            cml__sb_put(hdr, ":", 1);
            sb_json(hdr, values[i]);
        }
        cml__sb_put(hdr, "}", 1);
    }
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const cml_tensor *t = tensors[i].tensor;
        if (i || n_meta) cml__sb_put(hdr, ",", 1);
        sb_json(hdr, tensors[i].name);
        sb_str(hdr, ":{\"dtype\":\"");
        sb_str(hdr, cml__st_dtype_name(t->dtype));
        sb_str(hdr, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            snprintf(num, sizeof num, d ? ",%" PRId64 : "%" PRId64, t->shape[d]);
            sb_str(hdr, num);
        }
        uint64_t nbytes = (uint64_t)cml_tensor_numel(t) * cml_dtype_size(t->dtype);
        snprintf(num, sizeof num, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", offset, offset + nbytes);
        sb_str(hdr, num);
        offset += nbytes;
    }
    cml__sb_put(hdr, "}", 1);
    while (!hdr->oom && hdr->len % 8) cml__sb_put(hdr, " ", 1);
    if (hdr->oom) return cml__error(CML_ERR_OOM, "%s: out of memory building the header", who);
    CML_CHECK_ARG(hdr->len <= CML__ST_MAX_HEADER, "%s: the header would be %zu bytes, more than the format's limit %llu",
                  who, hdr->len, CML__ST_MAX_HEADER);
    return CML_OK;
}

/* Writes one tensor's elements in row-major order from the host. */
static cml_status write_tensor(cml__atomic_file *f, const char *who, const char *name, const cml_tensor *t) {
    size_t nbytes = (size_t)cml_tensor_numel(t) * cml_dtype_size(t->dtype);
    if (nbytes == 0) return CML_OK;
    cml_tensor *host = NULL;
    if (t->storage->device.type != CML_CPU) {
        bool prev = cml_set_grad_enabled(false);
        host = cml_tensor_to(t, CML_DEVICE_CPU);
        cml_set_grad_enabled(prev);
        if (!host) return cml_last_status();
        t = host;
    }
    cml_status s = CML_OK;
    if (cml_tensor_is_contiguous(t)) {
        cml__atomic_write(f, cml_tensor_data(t), nbytes);
    } else {
        void *buf = malloc(nbytes);
        s = buf ? cml_tensor_to_host(t, buf, nbytes)
                : cml__error(CML_ERR_OOM, "%s: out of memory copying tensor \"%s\" (%zu bytes)", who, name, nbytes);
        if (s == CML_OK) cml__atomic_write(f, buf, nbytes);
        free(buf);
    }
    cml_tensor_release(host);
    return s;
}

static cml_status write_body(cml__atomic_file *f, const char *who, const cml__sbuf *hdr, const cml_named_tensor *tensors,
                             int n) {
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)hdr->len >> (8 * i));
    cml__atomic_write(f, len, 8);
    cml__atomic_write(f, hdr->p, hdr->len);
    for (int i = 0; i < n; i++) CML_TRY(write_tensor(f, who, tensors[i].name, tensors[i].tensor));
    return CML_OK;
}

cml_status cml__safetensors_write(cml__atomic_file *f, const char *who, const cml_named_tensor *tensors, int n,
                                  const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    cml__sbuf hdr = {0};
    cml_status s = build_header(who, tensors, n, meta_keys, meta_values, n_meta, &hdr);
    if (s == CML_OK) s = write_body(f, who, &hdr, tensors, n);
    free(hdr.p);
    return s;
}

cml_status cml_safetensors_save(const char *path, const cml_named_tensor *tensors, int n,
                                const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    const char *who = "cml_safetensors_save";
    CML_CHECK_ARG(path && path[0], "%s: path must not be NULL or empty", who);
    cml__sbuf hdr = {0};
    cml_status s = build_header(who, tensors, n, meta_keys, meta_values, n_meta, &hdr);
    cml__atomic_file f;
    if (s == CML_OK) {
        s = cml__atomic_begin(&f, who, path);
        if (s == CML_OK) {
            s = write_body(&f, who, &hdr, tensors, n);
            if (s == CML_OK) s = cml__atomic_finish(&f);
            if (s == CML_OK) s = cml__atomic_commit(&f);
            cml__atomic_abort(&f);
        }
    }
    free(hdr.p);
    return s;
}
