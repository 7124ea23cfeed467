/* Character-level text data: loading a text file, a byte vocabulary, encoding,
 * and random next-token windows for language-model training. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/data.h"
#include "runtime/error.h"

cml_status cml_text_load(const char *path, char **text, size_t *len) {
    const char *who = "cml_text_load";
    CML_CHECK_ARG(path && text && len, "%s: path, text and len must not be NULL", who);
    *text = NULL;
    *len = 0;
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return cml__error(CML_ERR_IO, "%s: cannot open \"%s\": %s", who, path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    cml_status s = buf ? CML_OK : cml__error(CML_ERR_OOM, "%s: out of memory reading \"%s\"", who, path);
    while (s == CML_OK) {
        if (cap - n < 2) {
            char *p = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!p) {
                s = cml__error(CML_ERR_OOM, "%s: out of memory reading \"%s\" (%zu bytes so far)", who, path, n);
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) s = cml__error(CML_ERR_IO, "%s: cannot read \"%s\": %s", who, path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (s == CML_OK && n == 0) s = cml__error(CML_ERR_CORRUPT, "%s: \"%s\" is empty", who, path);
    if (s == CML_OK) {
        const char *nul = memchr(buf, '\0', n);
        if (nul)
            s = cml__error(CML_ERR_CORRUPT, "%s: \"%s\" is not a text file (a NUL byte at offset %zu)", who, path,
                           (size_t)(nul - buf));
    }
    if (s != CML_OK) {
        free(buf);
        return s;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return CML_OK;
}

/* Fills ids[] (byte -> id) from chars[0..size). */
static void vocab_index(cml_char_vocab *v) {
    for (int b = 0; b < 256; b++) v->ids[b] = -1;
    for (int i = 0; i < v->size; i++) v->ids[v->chars[i]] = (int16_t)i;
}

cml_status cml_char_vocab_build(cml_char_vocab *v, const char *text, size_t len) {
    CML_CHECK_ARG(v && text, "cml_char_vocab_build: v and text must not be NULL");
    CML_CHECK_ARG(len >= 1, "cml_char_vocab_build: len=%zu must be >= 1", len);
    bool seen[256] = {false};
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < len; i++) seen[p[i]] = true;
    memset(v, 0, sizeof *v);
    for (int b = 0; b < 256; b++)
        if (seen[b]) v->chars[v->size++] = (unsigned char)b;
    vocab_index(v);
    return CML_OK;
}

/* A printable rendering of a byte for messages: 'a', '\n' or 0x01. */
static const char *byte_str(unsigned char b, char *buf, size_t n) {
    if (b == '\n') snprintf(buf, n, "'\\n'");
    else if (b == '\t') snprintf(buf, n, "'\\t'");
    else if (b == '\r') snprintf(buf, n, "'\\r'");
    else if (b >= 32 && b < 127) snprintf(buf, n, "'%c'", (char)b);
    else snprintf(buf, n, "byte 0x%02x", (unsigned)b);
    return buf;
}

cml_status cml_char_vocab_from_chars(cml_char_vocab *v, const unsigned char *chars, int size) {
    const char *who = "cml_char_vocab_from_chars";
    CML_CHECK_ARG(v && chars, "%s: v and chars must not be NULL", who);
    CML_CHECK_ARG(size >= 1 && size <= 256, "%s: size=%d must be in [1, 256]", who, size);
    cml_char_vocab tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.size = size;
    memcpy(tmp.chars, chars, (size_t)size);
    vocab_index(&tmp);
    for (int i = 0; i < size; i++) {
        if (tmp.ids[chars[i]] != i) {
            char buf[16];
            return cml__error(CML_ERR_INVALID_ARG, "%s: %s appears twice (ids %d and %d)", who,
                              byte_str(chars[i], buf, sizeof buf), i, (int)tmp.ids[chars[i]]);
        }
    }
    *v = tmp;
    return CML_OK;
}

cml_status cml_char_encode(const cml_char_vocab *v, const char *text, size_t len, int64_t *ids) {
    const char *who = "cml_char_encode";
    CML_CHECK_ARG(v && (text || len == 0) && (ids || len == 0), "%s: v, text and ids must not be NULL", who);
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < len; i++) {
        int id = v->ids[p[i]];
        if (id < 0) {
            char buf[16];
            return cml__error(CML_ERR_INVALID_ARG, "%s: %s at offset %zu is not in the vocabulary (%d characters)",
                              who, byte_str(p[i], buf, sizeof buf), i, v->size);
        }
        ids[i] = id;
    }
    return CML_OK;
}

/* Uniform in [0, bound) for bound >= 1 (64-bit rejection sampling beyond 32 bits). */
static uint64_t below64(cml_rng *rng, uint64_t bound) {
    if (bound <= UINT32_MAX) return cml_rng_below(rng, (uint32_t)bound);
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    for (;;) {
        uint64_t hi = cml_rng_u32(rng);
        uint64_t x = hi << 32 | cml_rng_u32(rng);
        if (x < limit) return x % bound;
    }
}

cml_status cml_token_windows(const int64_t *tokens, int64_t n, int64_t B, int64_t T, cml_rng *rng,
                             cml_tensor **x, cml_tensor **y) {
    const char *who = "cml_token_windows";
    CML_CHECK_ARG(tokens && rng && x && y, "%s: tokens, rng, x and y must not be NULL", who);
    *x = *y = NULL;
    CML_CHECK_ARG(B >= 1 && T >= 1, "%s: B=%lld and T=%lld must be >= 1", who, (long long)B, (long long)T);
    CML_CHECK_ARG(n >= T + 1, "%s: n=%lld tokens is too short for windows of T + 1 = %lld tokens", who,
                  (long long)n, (long long)(T + 1));
    int64_t shape[2] = {B, T};
    cml_tensor *xt = cml_tensor_empty(2, shape, CML_I64, CML_DEVICE_CPU);
    cml_tensor *yt = cml_tensor_empty(2, shape, CML_I64, CML_DEVICE_CPU);
    if (!xt || !yt) {
        cml_tensor_release(xt);
        cml_tensor_release(yt);
        return cml_last_status() != CML_OK ? cml_last_status() : cml__error(CML_ERR_OOM, "%s: out of memory", who);
    }
    int64_t *xd = cml_tensor_data(xt), *yd = cml_tensor_data(yt);
    for (int64_t b = 0; b < B; b++) {
        /* start in [0, n - T - 1]: the window tokens[start .. start + T] fits. */
        int64_t start = (int64_t)below64(rng, (uint64_t)(n - T));
        memcpy(xd + b * T, tokens + start, (size_t)T * sizeof(int64_t));
        memcpy(yd + b * T, tokens + start + 1, (size_t)T * sizeof(int64_t));
    }
    *x = xt;
    *y = yt;
    return CML_OK;
}
