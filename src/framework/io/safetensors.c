/* safetensors files (https://github.com/huggingface/safetensors).
 *
 * Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
 *   {"__metadata__": {"k": "v", ...}, "name": {"dtype": "F32", "shape": [2, 3],
 *    "data_offsets": [begin, end]}, ...}
 * padded with spaces to a multiple of 8, then the byte buffer. Offsets are
 * relative to the buffer; the entries tile it exactly (no gap, no overlap, no
 * trailing byte) and each holds numel * dtype size bytes, row-major, little-endian.
 *
 * The writer emits what the Python library does (compact JSON, "__metadata__"
 * first, space padding), keeping the caller's tensor order. The reader is a
 * strict parser for exactly this subset of JSON (objects, strings with escapes,
 * non-negative integers, arrays of integers); every defect is CML_ERR_CORRUPT
 * naming the file and, where there is one, the entry. */
#define _POSIX_C_SOURCE 200809L /* fileno, fstat */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "camel/autograd.h"
#include "framework/io/io_impl.h"
#include "framework/tensor_impl.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif


static const struct {
    const char *name;
    cml_dtype dtype;
} st_dtypes[] = {{"F32", CML_F32},         {"F16", CML_F16},         {"BF16", CML_BF16}, {"F8_E4M3", CML_F8E4M3},
                 {"F8_E5M2", CML_F8E5M2}, {"I32", CML_I32},         {"I64", CML_I64},   {"U8", CML_U8}};
#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

/* Valid safetensors dtypes camel has no type for (CML_ERR_UNSUPPORTED, not corrupt). */
static const char *const st_foreign[] = {"F64", "BOOL", "I8", "I16", "U16", "U32", "U64", "C64", "F8_E8M0", "F4",
                                         "F6_E2M3", "F6_E3M2"};

typedef struct st_entry {
    char *name;
    cml_dtype dtype;
    int ndim;
    int64_t shape[CML_MAX_DIMS];
    uint64_t begin, end;
} st_entry;

struct cml_safetensors {
    char *path;
    int n, cap;
    st_entry *e;  /* header order */
    int *by_name; /* indices sorted by name */
    int n_meta, meta_cap;
    char **keys, **values;
    unsigned char *data;
    uint64_t data_len;
};

bool cml__utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (c < 0xC2 || c > 0xF4 || i + (size_t)len > n) return false;
        uint32_t cp = c & (0x3Fu >> (len - 1));
        for (int k = 1; k < len; k++) {
            if ((s[i + (size_t)k] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + (size_t)k] & 0x3Fu);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += (size_t)len;
    }
    return true;
}

const char *cml__st_dtype_name(cml_dtype dt) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (st_dtypes[i].dtype == dt) return st_dtypes[i].name;
    return NULL;
}

/* ---- a growable byte buffer (shared with the writer) ------------------------------------ */

void cml__sb_put(cml__sbuf *b, const void *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* ---- the header parser ------------------------------------------------------------------- */

typedef struct jparser {
    const char *path;
    const unsigned char *s;
    size_t n, pos;
    const char *entry; /* the entry being parsed, for messages */
    cml__sbuf str;          /* scratch for strings */
} jparser;

static cml_status jfail(jparser *p, cml_status status, const char *fmt, ...) CML__PRINTF(3, 4);
static cml_status jfail(jparser *p, cml_status status, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->entry)
        return cml__error(status, "cml_safetensors_open: \"%s\": entry \"%.200s\": %s (at byte %zu of the header)",
                          p->path, p->entry, msg, p->pos);
    return cml__error(status, "cml_safetensors_open: \"%s\": bad header: %s (at byte %zu of the header)", p->path, msg,
                      p->pos);
}
#define JFAIL(p, ...) jfail((p), CML_ERR_CORRUPT, __VA_ARGS__)

static void skip_ws(jparser *p) {
    while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
                             p->s[p->pos] == '\r'))
        p->pos++;
}

/* Skips whitespace, then consumes c. */
static cml_status expect(jparser *p, char c, const char *what) {
    skip_ws(p);
    if (p->pos >= p->n) return JFAIL(p, "unexpected end of the header, expected %s", what);
    unsigned char found = p->s[p->pos];
    if (found != (unsigned char)c) {
        if (found >= 0x20 && found < 0x7F) return JFAIL(p, "expected %s, found '%c'", what, found);
        return JFAIL(p, "expected %s, found byte 0x%02x", what, found);
    }
    p->pos++;
    return CML_OK;
}

/* Peeks at the next non-space character (0 at the end). */
static int peek(jparser *p) {
    skip_ws(p);
    return p->pos < p->n ? p->s[p->pos] : 0;
}

static int hex4(const unsigned char *h) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = h[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static void put_utf8(cml__sbuf *b, uint32_t cp) {
    unsigned char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (unsigned char)(0xF0 | cp >> 18);
        u[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        u[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    cml__sb_put(b, u, n);
}

/* A string into p->str (NUL-terminated, valid UTF-8, no NUL inside). */
static cml_status parse_string(jparser *p) {
    CML_TRY(expect(p, '"', "'\"' (a string)"));
    p->str.len = 0;
    cml__sb_put(&p->str, "", 0);
    for (;;) {
        if (p->pos >= p->n) return JFAIL(p, "unterminated string");
        unsigned char c = p->s[p->pos];
        if (c == '"') break;
        if (c < 0x20) return JFAIL(p, "control character 0x%02x inside a string", c);
        if (c != '\\') {
            cml__sb_put(&p->str, &p->s[p->pos++], 1);
            continue;
        }
        if (p->pos + 1 >= p->n) return JFAIL(p, "unterminated string");
        unsigned char e = p->s[p->pos + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char out[] = "\"\\/\b\f\n\r\t";
            cml__sb_put(&p->str, &out[simple - "\"\\/bfnrt"], 1);
            p->pos += 2;
            continue;
        }
        if (e != 'u') return JFAIL(p, "invalid escape '\\%c'", e);
        int hi = p->pos + 6 <= p->n ? hex4(p->s + p->pos + 2) : -1;
        if (hi < 0) return JFAIL(p, "\\u must be followed by 4 hex digits");
        uint32_t cp = (uint32_t)hi;
        p->pos += 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return JFAIL(p, "lone low surrogate \\u%04x", (unsigned)cp);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            int lo = p->pos + 6 <= p->n && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u' ? hex4(p->s + p->pos + 2)
                                                                                                : -1;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return JFAIL(p, "high surrogate \\u%04x is not followed by a low surrogate", (unsigned)cp);
            cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            p->pos += 6;
        }
        if (cp == 0) return JFAIL(p, "\\u0000 (a NUL character) is not allowed in names");
        put_utf8(&p->str, cp);
    }
    p->pos++;
    if (p->str.oom) return jfail(p, CML_ERR_OOM, "out of memory");
    if (!cml__utf8_valid(p->str.p, p->str.len)) return JFAIL(p, "string is not valid UTF-8");
    return CML_OK;
}

static char *take_string(jparser *p) {
    char *s = malloc(p->str.len + 1);
    if (s) memcpy(s, p->str.p, p->str.len + 1);
    return s;
}

static cml_status parse_uint(jparser *p, uint64_t *out) {
    int c = peek(p);
    if (c == '-') return JFAIL(p, "negative numbers are not allowed");
    if (c < '0' || c > '9') return JFAIL(p, "expected a non-negative integer");
    if (c == '0' && p->pos + 1 < p->n && p->s[p->pos + 1] >= '0' && p->s[p->pos + 1] <= '9')
        return JFAIL(p, "integers may not have leading zeros");
    uint64_t v = 0;
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        unsigned d = p->s[p->pos] - '0';
        if (v > (UINT64_MAX - d) / 10) return JFAIL(p, "integer does not fit in 64 bits");
        v = v * 10 + d;
        p->pos++;
    }
    if (p->pos < p->n && (p->s[p->pos] == '.' || p->s[p->pos] == 'e' || p->s[p->pos] == 'E'))
        return JFAIL(p, "expected an integer, found a fraction or exponent");
    *out = v;
    return CML_OK;
}

/* [u, u, ...] with at most max entries. */
static cml_status parse_uints(jparser *p, uint64_t *v, int max, int *count, const char *what) {
    CML_TRY(expect(p, '[', "'[' (an array)"));
    *count = 0;
    if (peek(p) == ']') {
        p->pos++;
        return CML_OK;
    }
    for (;;) {
        if (*count == max)
            return jfail(p, max == CML_MAX_DIMS ? CML_ERR_UNSUPPORTED : CML_ERR_CORRUPT,
                         "%s has more than %d entries", what, max);
        CML_TRY(parse_uint(p, &v[(*count)++]));
        int c = peek(p);
        p->pos++;
        if (c == ']') return CML_OK;
        if (c != ',') {
            p->pos--;
            return JFAIL(p, "expected ',' or ']' in %s", what);
        }
    }
}

/* Checks dtype, shape and offsets of one parsed entry (its own consistency). */
static cml_status check_entry(jparser *p, st_entry *e, const uint64_t *shape, int ndim, const uint64_t *off, int noff) {
    if (noff != 2) return JFAIL(p, "data_offsets must have 2 entries, found %d", noff);
    e->begin = off[0];
    e->end = off[1];
    if (e->end < e->begin)
        return JFAIL(p, "data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin", e->begin, e->end);
    int64_t total = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] > (uint64_t)INT64_MAX || (shape[i] > 0 && total > INT64_MAX / 16 / (int64_t)shape[i]))
            return JFAIL(p, "shape is too large");
        e->shape[i] = (int64_t)shape[i];
        total *= e->shape[i];
    }
    e->ndim = ndim;
    uint64_t nbytes = (uint64_t)total * cml_dtype_size(e->dtype);
    if (e->end - e->begin != nbytes)
        return JFAIL(p, "data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64 " bytes, but the shape and dtype %s "
                        "need %" PRIu64, e->begin, e->end, e->end - e->begin, cml__st_dtype_name(e->dtype), nbytes);
    return CML_OK;
}

static cml_status parse_dtype(jparser *p, st_entry *e) {
    CML_TRY(parse_string(p));
    for (int i = 0; i < ST_NDTYPES; i++)
        if (strcmp(p->str.p, st_dtypes[i].name) == 0) {
            e->dtype = st_dtypes[i].dtype;
            return CML_OK;
        }
    for (size_t i = 0; i < sizeof st_foreign / sizeof st_foreign[0]; i++)
        if (strcmp(p->str.p, st_foreign[i]) == 0)
            return jfail(p, CML_ERR_UNSUPPORTED, "dtype \"%s\" has no camel equivalent (supported: F32 F16 BF16 "
                                                 "F8_E4M3 F8_E5M2 I32 I64 U8)", p->str.p);
    return JFAIL(p, "unknown dtype \"%.40s\" (expected F32 F16 BF16 F8_E4M3 F8_E5M2 I32 I64 U8)", p->str.p);
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]} into e (name already set). */
static cml_status parse_entry(jparser *p, st_entry *e) {
    CML_TRY(expect(p, '{', "'{' (a tensor entry)"));
    bool seen[3] = {false, false, false};
    uint64_t shape[CML_MAX_DIMS], off[2];
    int ndim = 0, noff = 0;
    if (peek(p) != '}') {
        for (;;) {
            CML_TRY(parse_string(p));
            int k = strcmp(p->str.p, "dtype") == 0 ? 0 : strcmp(p->str.p, "shape") == 0 ? 1
                  : strcmp(p->str.p, "data_offsets") == 0 ? 2 : -1;
            if (k < 0) return JFAIL(p, "unknown key \"%.40s\"", p->str.p);
            if (seen[k]) return JFAIL(p, "key \"%s\" appears twice", p->str.p);
            seen[k] = true;
            CML_TRY(expect(p, ':', "':'"));
            if (k == 0) CML_TRY(parse_dtype(p, e));
            if (k == 1) CML_TRY(parse_uints(p, shape, CML_MAX_DIMS, &ndim, "shape"));
            if (k == 2) CML_TRY(parse_uints(p, off, 2, &noff, "data_offsets"));
            if (peek(p) != ',') break;
            p->pos++;
        }
    }
    CML_TRY(expect(p, '}', "',' or '}' after a key of the entry"));
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    for (int k = 0; k < 3; k++)
        if (!seen[k]) return JFAIL(p, "missing \"%s\"", keys[k]);
    return check_entry(p, e, shape, ndim, off, noff);
}

static cml_status parse_metadata(jparser *p, cml_safetensors *f) {
    CML_TRY(expect(p, '{', "'{' (the metadata object)"));
    if (peek(p) == '}') {
        p->pos++;
        return CML_OK;
    }
    for (;;) {
        CML_TRY(parse_string(p));
        if (f->n_meta == f->meta_cap) {
            int cap = f->meta_cap ? 2 * f->meta_cap : 8;
            char **k = realloc(f->keys, (size_t)cap * sizeof *k);
            if (k) f->keys = k;
            char **v = k ? realloc(f->values, (size_t)cap * sizeof *v) : NULL;
            if (v) f->values = v;
            if (!k || !v) return jfail(p, CML_ERR_OOM, "out of memory");
            f->meta_cap = cap;
        }
        f->keys[f->n_meta] = take_string(p);
        f->values[f->n_meta] = NULL;
        if (!f->keys[f->n_meta++]) return jfail(p, CML_ERR_OOM, "out of memory");
        CML_TRY(expect(p, ':', "':'"));
        if (peek(p) != '"') return JFAIL(p, "metadata value of \"%.100s\" must be a string", f->keys[f->n_meta - 1]);
        CML_TRY(parse_string(p));
        if (!(f->values[f->n_meta - 1] = take_string(p))) return jfail(p, CML_ERR_OOM, "out of memory");
        int c = peek(p);
        p->pos++;
        if (c == '}') return CML_OK;
        if (c != ',') {
            p->pos--;
            return JFAIL(p, "expected ',' or '}' in the metadata");
        }
    }
}

static cml_status parse_header(jparser *p, cml_safetensors *f) {
    CML_TRY(expect(p, '{', "'{' (the header must be a JSON object)"));
    bool seen_meta = false;
    if (peek(p) != '}') {
        for (;;) {
            CML_TRY(parse_string(p));
            CML_TRY(expect(p, ':', "':'"));
            if (strcmp(p->str.p, "__metadata__") == 0) {
                if (seen_meta) return JFAIL(p, "\"__metadata__\" appears twice");
                seen_meta = true;
                CML_TRY(parse_metadata(p, f));
            } else {
                if (f->n == f->cap) {
                    int cap = f->cap ? 2 * f->cap : 16;
                    st_entry *e = cap < INT32_MAX / 2 ? realloc(f->e, (size_t)cap * sizeof *e) : NULL;
                    if (!e) return jfail(p, CML_ERR_OOM, "out of memory");
                    f->e = e;
                    f->cap = cap;
                }
                st_entry *e = &f->e[f->n];
                memset(e, 0, sizeof *e);
                if (!(e->name = take_string(p))) return jfail(p, CML_ERR_OOM, "out of memory");
                f->n++;
                p->entry = e->name;
                CML_TRY(parse_entry(p, e));
                p->entry = NULL;
            }
            if (peek(p) != ',') break;
            p->pos++;
        }
    }
    CML_TRY(expect(p, '}', "',' or '}' after an entry"));
    skip_ws(p);
    if (p->pos != p->n) return JFAIL(p, "unexpected characters after the JSON object");
    return CML_OK;
}

/* ---- validation of the whole file -------------------------------------------------------- */

static int cmp_by_name(const void *a, const void *b) {
    return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}

/* By (begin, end), then by position in the header (the entries are one array). */
static int cmp_by_offset(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x < y ? -1 : x > y;
}

static cml_status check_layout(cml_safetensors *f) {
    const char *who = "cml_safetensors_open";
    for (int i = 0; i < f->n; i++)
        if (f->e[i].end > f->data_len)
            return cml__error(CML_ERR_CORRUPT,
                              "%s: \"%s\": entry \"%.200s\": data_offsets [%" PRIu64 ", %" PRIu64 "] go beyond the "
                              "%" PRIu64 " bytes of data (the file is truncated or the offsets are wrong)",
                              who, f->path, f->e[i].name, f->e[i].begin, f->e[i].end, f->data_len);
    size_t n = (size_t)(f->n > 0 ? f->n : 1);
    f->by_name = malloc(n * sizeof *f->by_name);
    const st_entry **sorted = malloc(n * sizeof *sorted);
    if (!f->by_name || !sorted) {
        free(sorted);
        return cml__error(CML_ERR_OOM, "%s: \"%s\": out of memory", who, f->path);
    }
    cml_status s = CML_OK;
    for (int i = 0; i < f->n; i++) sorted[i] = &f->e[i];
    qsort(sorted, (size_t)f->n, sizeof *sorted, cmp_by_name);
    for (int i = 0; i < f->n; i++) f->by_name[i] = (int)(sorted[i] - f->e);
    for (int i = 1; i < f->n && s == CML_OK; i++)
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0)
            s = cml__error(CML_ERR_CORRUPT, "%s: \"%s\": entry \"%.200s\" appears twice", who, f->path,
                           sorted[i]->name);
    for (int i = 0; i < f->n; i++) sorted[i] = &f->e[i];
    qsort(sorted, (size_t)f->n, sizeof *sorted, cmp_by_offset);
    uint64_t expected = 0;
    const char *prev = NULL;
    for (int i = 0; i < f->n && s == CML_OK; i++) {
        const st_entry *e = sorted[i];
        if (e->begin < expected)
            s = cml__error(CML_ERR_CORRUPT, "%s: \"%s\": entry \"%.200s\": data_offsets [%" PRIu64 ", %" PRIu64
                                            "] overlap entry \"%.200s\"", who, f->path, e->name, e->begin, e->end,
                           prev ? prev : "?");
        else if (e->begin > expected)
            s = cml__error(CML_ERR_CORRUPT, "%s: \"%s\": entry \"%.200s\": data_offsets [%" PRIu64 ", %" PRIu64
                                            "] leave a gap of %" PRIu64 " bytes before them", who, f->path, e->name,
                           e->begin, e->end, e->begin - expected);
        expected = e->end;
        prev = e->name;
    }
    if (s == CML_OK && expected != f->data_len)
        s = cml__error(CML_ERR_CORRUPT, "%s: \"%s\": %" PRIu64 " trailing byte%s after the last tensor's data "
                                        "(the entries cover %" PRIu64 " of %" PRIu64 " bytes)",
                       who, f->path, f->data_len - expected, f->data_len - expected == 1 ? "" : "s", expected,
                       f->data_len);
    free(sorted);
    if (s == CML_OK) {
        bool oom;
        const char *dup = cml__find_duplicate((const char *const *)f->keys, f->n_meta, &oom);
        if (oom) s = cml__error(CML_ERR_OOM, "%s: \"%s\": out of memory", who, f->path);
        else if (dup)
            s = cml__error(CML_ERR_CORRUPT, "%s: \"%s\": metadata key \"%.200s\" appears twice", who, f->path, dup);
    }
    return s;
}

/* ---- reading ----------------------------------------------------------------------------- */

/* Reads exactly n bytes (what: "header", "data") that start at file offset `at`. */
static cml_status read_exact(FILE *fp, void *buf, uint64_t n, const char *path, const char *what, uint64_t at) {
    errno = 0;
    size_t got = n ? fread(buf, 1, (size_t)n, fp) : 0;
    if (got == n) return CML_OK;
    if (ferror(fp))
        return cml__error(CML_ERR_IO, "cml_safetensors_open: reading \"%s\": %s", path, strerror(errno ? errno : EIO));
    return cml__error(CML_ERR_CORRUPT,
                      "cml_safetensors_open: \"%s\" is truncated: expected %" PRIu64 " bytes of %s at offset %" PRIu64
                      ", found %zu", path, n, what, at, got);
}

static cml_status open_file(cml_safetensors *f, FILE *fp) {
    const char *who = "cml_safetensors_open", *path = f->path;
    struct stat st;
    if (fstat(fileno(fp), &st) != 0) return cml__error(CML_ERR_IO, "%s: cannot stat \"%s\": %s", who, path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return cml__error(CML_ERR_IO, "%s: \"%s\" is not a regular file", who, path);
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8)
        return cml__error(CML_ERR_CORRUPT, "%s: \"%s\" is %" PRIu64 " bytes, too short for the 8-byte header length "
                                           "of a safetensors file", who, path, size);
    unsigned char len8[8];
    CML_TRY(read_exact(fp, len8, 8, path, "header length", 0));
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    if (hlen > CML__ST_MAX_HEADER)
        return cml__error(CML_ERR_CORRUPT, "%s: \"%s\": the header length %" PRIu64 " is larger than the limit %llu "
                                           "(not a safetensors file, or a corrupt one)", who, path, hlen, CML__ST_MAX_HEADER);
    if (hlen > size - 8)
        return cml__error(CML_ERR_CORRUPT, "%s: \"%s\": the header length %" PRIu64 " is larger than the %" PRIu64
                                           " bytes that follow it (truncated or corrupt)", who, path, hlen, size - 8);
    unsigned char *hdr = malloc((size_t)hlen + 1);
    if (!hdr) return cml__error(CML_ERR_OOM, "%s: \"%s\": out of memory for a %" PRIu64 "-byte header", who, path, hlen);
    cml_status s = read_exact(fp, hdr, hlen, path, "header", 8);
    if (s == CML_OK) {
        jparser p = {path, hdr, (size_t)hlen, 0, NULL, {0}};
        s = parse_header(&p, f);
        free(p.str.p);
    }
    free(hdr);
    CML_TRY(s);
    f->data_len = size - 8 - hlen;
    CML_TRY(check_layout(f));
    f->data = malloc(f->data_len ? (size_t)f->data_len : 1);
    if (!f->data)
        return cml__error(CML_ERR_OOM, "%s: \"%s\": out of memory for %" PRIu64 " bytes of data", who, path, f->data_len);
    return read_exact(fp, f->data, f->data_len, path, "data", 8 + hlen);
}

cml_status cml_safetensors_open(const char *path, cml_safetensors **out) {
    CML_CHECK_ARG(out, "cml_safetensors_open: out must not be NULL");
    *out = NULL;
    CML_CHECK_ARG(path, "cml_safetensors_open: path must not be NULL");
    errno = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return cml__error(CML_ERR_IO, "cml_safetensors_open: cannot open \"%s\": %s", path, strerror(errno));
    cml_safetensors *f = calloc(1, sizeof *f);
    size_t n = strlen(path);
    if (f) f->path = malloc(n + 1);
    cml_status s;
    if (!f || !f->path) {
        s = cml__error(CML_ERR_OOM, "cml_safetensors_open: \"%s\": out of memory", path);
    } else {
        memcpy(f->path, path, n + 1);
        s = open_file(f, fp);
    }
    fclose(fp);
    if (s != CML_OK) {
        cml_safetensors_close(f);
        return s;
    }
    *out = f;
    return CML_OK;
}

static int find_entry(const cml_safetensors *f, const char *name) {
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->e[f->by_name[mid]].name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int cml_safetensors_count(const cml_safetensors *f) { return f ? f->n : 0; }

const char *cml_safetensors_name(const cml_safetensors *f, int i) {
    return f && i >= 0 && i < f->n ? f->e[i].name : NULL;
}

const void *cml__safetensors_entry(const cml_safetensors *f, const char *name, cml_dtype *dtype, int *ndim,
                                   const int64_t **shape, size_t *nbytes) {
    int i = f && name ? find_entry(f, name) : -1;
    if (i < 0) return NULL;
    const st_entry *e = &f->e[i];
    *dtype = e->dtype;
    *ndim = e->ndim;
    *shape = e->shape;
    *nbytes = (size_t)(e->end - e->begin);
    return f->data + e->begin;
}

cml_tensor *cml_safetensors_get(const cml_safetensors *f, const char *name) {
    if (!f || !name) {
        cml__error(CML_ERR_INVALID_ARG, "cml_safetensors_get: f and name must not be NULL");
        return NULL;
    }
    int i = find_entry(f, name);
    if (i < 0) {
        cml__error(CML_ERR_INVALID_ARG, "cml_safetensors_get: \"%s\" has no entry \"%s\"", f->path, name);
        return NULL;
    }
    const st_entry *e = &f->e[i];
    cml_tensor *t = cml_tensor_empty(e->ndim, e->shape, e->dtype, CML_DEVICE_CPU);
    if (t && e->end > e->begin) memcpy(cml_tensor_data(t), f->data + e->begin, (size_t)(e->end - e->begin));
    return t;
}

const char *cml_safetensors_meta(const cml_safetensors *f, const char *key) {
    if (!f || !key) return NULL;
    for (int i = 0; i < f->n_meta; i++)
        if (f->values[i] && strcmp(f->keys[i], key) == 0) return f->values[i];
    return NULL;
}

void cml_safetensors_close(cml_safetensors *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->e[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->keys[i]);
        free(f->values[i]);
    }
    free(f->e);
    free(f->by_name);
    free(f->keys);
    free(f->values);
    free(f->data);
    free(f->path);
    free(f);
}
