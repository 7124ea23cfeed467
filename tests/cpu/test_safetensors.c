/* safetensors: round trips of every dtype (0-d, empty, non-contiguous, metadata
 * with escapes), a file laid out byte for byte as the Python library writes it,
 * an independent check of our header, truncated / bit-flipped / hand-made
 * corrupt headers (all rejected with a message, never a crash), argument
 * errors and atomic writes. */
#define _POSIX_C_SOURCE 200809L /* mkdir, rmdir, getpid, geteuid, chmod */
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define TMP CML_TEST_TMP "/test_safetensors_tmp"

static char path_buf[512];
static const char *tmp_path(const char *name) {
    snprintf(path_buf, sizeof path_buf, "%s/%s", TMP, name);
    return path_buf;
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Whole file into a malloc'd buffer (*n bytes); NULL when it cannot be read. */
static unsigned char *read_all(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc(size > 0 ? (size_t)size : 1);
    *n = buf ? fread(buf, 1, (size_t)size, fp) : 0;
    fclose(fp);
    return buf;
}

static void write_all(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (!fp) return;
    CHECK(fwrite(data, 1, n, fp) == n);
    fclose(fp);
}

/* A file with this header JSON (padded with spaces to a multiple of 8 unless
 * exact) followed by data_len bytes 0, 1, 2, ... */
static void write_raw(const char *path, const char *json, size_t data_len, bool exact) {
    size_t h = strlen(json), hp = exact ? h : (h + 7) / 8 * 8;
    size_t n = 8 + hp + data_len;
    unsigned char *buf = malloc(n);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hp >> (8 * i));
    memcpy(buf + 8, json, h);
    memset(buf + 8 + h, ' ', hp - h);
    for (size_t i = 0; i < data_len; i++) buf[8 + hp + i] = (unsigned char)i;
    write_all(path, buf, n);
    free(buf);
}

/* A tensor of the given dtype filled with random bytes (every bit pattern, NaNs included). */
static cml_tensor *random_tensor(int ndim, const int64_t *shape, cml_dtype dt, cml_rng *rng) {
    cml_tensor *t = cml_tensor_empty(ndim, shape, dt, CML_DEVICE_CPU);
    if (!t) return NULL;
    unsigned char *p = cml_tensor_data(t);
    size_t n = (size_t)cml_tensor_numel(t) * cml_dtype_size(dt);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)cml_rng_u32(rng);
    return t;
}

/* Same dtype, shape and bytes (row-major). */
static bool same_tensor(const cml_tensor *a, const cml_tensor *b) {
    if (!a || !b || cml_tensor_dtype(a) != cml_tensor_dtype(b) || cml_tensor_ndim(a) != cml_tensor_ndim(b)) return false;
    for (int i = 0; i < cml_tensor_ndim(a); i++)
        if (cml_tensor_size(a, i) != cml_tensor_size(b, i)) return false;
    size_t n = (size_t)cml_tensor_numel(a) * cml_dtype_size(cml_tensor_dtype(a));
    unsigned char *x = malloc(n + 1), *y = malloc(n + 1);
    bool ok = cml_tensor_to_host(a, x, n) == CML_OK && cml_tensor_to_host(b, y, n) == CML_OK && memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return ok;
}

static void test_roundtrip_every_dtype(void) {
    cml_rng rng;
    cml_rng_init(&rng, 42);
    const cml_dtype dts[] = {CML_F32, CML_F16, CML_BF16, CML_F8E4M3, CML_F8E5M2, CML_I32, CML_I64, CML_U8};
    enum { ND = 8, NT = ND + 4 };
    cml_tensor *ts[NT] = {0};
    cml_named_tensor nt[NT];
    char names[NT][32];
    for (int i = 0; i < ND; i++) {
        ts[i] = random_tensor(3, (int64_t[]){2, 3, i + 1}, dts[i], &rng);
        snprintf(names[i], sizeof names[i], "t.%s", cml_dtype_name(dts[i]));
    }
    ts[ND] = random_tensor(0, NULL, CML_F32, &rng); /* 0-d */
    snprintf(names[ND], 32, "scalar");
    ts[ND + 1] = random_tensor(2, (int64_t[]){0, 3}, CML_F16, &rng); /* empty */
    snprintf(names[ND + 1], 32, "empty");
    cml_tensor *base = random_tensor(2, (int64_t[]){3, 5}, CML_I64, &rng);
    ts[ND + 2] = cml_transpose(base, 0, 1); /* non-contiguous */
    snprintf(names[ND + 2], 32, "transposed");
    ts[ND + 3] = random_tensor(1, (int64_t[]){0}, CML_U8, &rng); /* empty, 1-d */
    snprintf(names[ND + 3], 32, "caf\xc3\xa9 \"quoted\" \\ \x01");
    for (int i = 0; i < NT; i++) {
        CHECK_NOT_NULL(ts[i]);
        nt[i] = (cml_named_tensor){names[i], ts[i]};
    }
    const char *keys[] = {"format", "text", "\xe2\x9c\x93 unicode"};
    const char *vals[] = {"pt", "line\nbreak\t\"q\" \\ \x1f end", ""};
    const char *path = tmp_path("roundtrip.safetensors");
    CHECK_OK(cml_safetensors_save(path, nt, NT, keys, vals, 3));

    cml_safetensors *f = NULL;
    CHECK_OK(cml_safetensors_open(path, &f));
    if (f) {
        CHECK(cml_safetensors_count(f) == NT);
        for (int i = 0; i < NT; i++) {
            CHECK_MSG(cml_safetensors_name(f, i) && strcmp(cml_safetensors_name(f, i), names[i]) == 0, "name %d", i);
            cml_tensor *t = cml_safetensors_get(f, names[i]);
            CHECK_NOT_NULL(t);
            CHECK_MSG(same_tensor(t, ts[i]), "tensor \"%s\" differs after the round trip", names[i]);
            if (t) CHECK(cml_tensor_is_contiguous(t));
            cml_tensor_release(t);
        }
        CHECK(cml_safetensors_name(f, NT) == NULL && cml_safetensors_name(f, -1) == NULL);
        for (int i = 0; i < 3; i++) {
            const char *v = cml_safetensors_meta(f, keys[i]);
            CHECK_MSG(v && strcmp(v, vals[i]) == 0, "meta %s", keys[i]);
        }
        CHECK(cml_safetensors_meta(f, "missing") == NULL);
        cml_clear_error();
        CHECK(cml_safetensors_get(f, "nope") == NULL);
        CHECK_ERROR(CML_ERR_INVALID_ARG, "nope");
        cml_safetensors_close(f);
    }
    /* No tensors and no metadata: "{}" padded to 8. */
    CHECK_OK(cml_safetensors_save(path, NULL, 0, NULL, NULL, 0));
    size_t n = 0;
    unsigned char *bytes = read_all(path, &n);
    CHECK(bytes && n == 16 && bytes[0] == 8 && memcmp(bytes + 8, "{}      ", 8) == 0);
    free(bytes);
    CHECK_OK(cml_safetensors_open(path, &f));
    CHECK(cml_safetensors_count(f) == 0);
    cml_safetensors_close(f);
    cml_tensor_release(base);
    cml_tensor_release_all(ts, NT);
}

/* What the Python library writes for
 *   save_file({"a": torch.tensor([1., 2.]), "b": torch.tensor([[3.], [4.]])}, p, metadata={"format": "pt"})
 * compact JSON, "__metadata__" first, entries in (dtype, name) order, space padding to 8. */
static const char py_header[] = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                                "\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2,1],\"data_offsets\":[8,16]}}";

static void test_python_layout_byte_for_byte(void) {
    size_t h = strlen(py_header), hp = (h + 7) / 8 * 8;
    unsigned char expected[512];
    for (int i = 0; i < 8; i++) expected[i] = (unsigned char)((uint64_t)hp >> (8 * i));
    memcpy(expected + 8, py_header, h);
    memset(expected + 8 + h, ' ', hp - h);
    const float a[2] = {1, 2}, b[2] = {3, 4};
    memcpy(expected + 8 + hp, a, 8); /* little-endian host */
    memcpy(expected + 8 + hp + 8, b, 8);
    size_t total = 8 + hp + 16;
    const char *path = tmp_path("python.safetensors");
    write_all(path, expected, total);

    cml_safetensors *f = NULL;
    CHECK_OK(cml_safetensors_open(path, &f));
    if (f) {
        cml_tensor *ta = cml_safetensors_get(f, "a"), *tb = cml_safetensors_get(f, "b");
        CHECK(ta && cml_tensor_ndim(ta) == 1 && cml_tensor_size(ta, 0) == 2 && cml_tensor_dtype(ta) == CML_F32);
        CHECK(tb && cml_tensor_ndim(tb) == 2 && cml_tensor_size(tb, 0) == 2 && cml_tensor_size(tb, 1) == 1);
        if (ta && tb) {
            CHECK(cml_tensor_item_at(ta, (int64_t[]){1}) == 2.0);
            CHECK(cml_tensor_item_at(tb, (int64_t[]){1, 0}) == 4.0);
        }
        const char *fmt = cml_safetensors_meta(f, "format");
        CHECK(fmt && strcmp(fmt, "pt") == 0);
        cml_tensor_release_all((cml_tensor *[]){ta, tb}, 2);
        cml_safetensors_close(f);
    }

    /* Our writer produces the same bytes for the same tensors. */
    cml_tensor *ta = cml_tensor_from_host(a, 1, (int64_t[]){2}, CML_F32, CML_DEVICE_CPU);
    cml_tensor *tb = cml_tensor_from_host(b, 2, (int64_t[]){2, 1}, CML_F32, CML_DEVICE_CPU);
    const char *ours = tmp_path("ours.safetensors");
    CHECK_OK(cml_safetensors_save(ours, (cml_named_tensor[]){{"a", ta}, {"b", tb}}, 2, (const char *[]){"format"},
                                  (const char *[]){"pt"}, 1));
    size_t n = 0;
    unsigned char *got = read_all(ours, &n);
    CHECK_MSG(got && n == total && memcmp(got, expected, total) == 0, "our file (%zu bytes) differs from the Python "
              "layout (%zu bytes): %.*s", n, total, got && n > 8 ? (int)(n - 8) : 0, got ? (const char *)got + 8 : "");
    free(got);
    cml_tensor_release_all((cml_tensor *[]){ta, tb}, 2);

    /* Whitespace, escapes and surrogate pairs as other JSON writers may emit them. */
    write_raw(path, "{ \"\\u00e9t\\u00E9\\ud83d\\ude00\\/\" : { \"shape\" : [ 1 ] , \"dtype\" : \"U8\" ,\n"
                    "\"data_offsets\" : [ 0 , 1 ] } ,\t\"__metadata__\" : { } }", 1, false);
    CHECK_OK(cml_safetensors_open(path, &f));
    if (f) {
        CHECK(cml_safetensors_count(f) == 1);
        const char *name = cml_safetensors_name(f, 0);
        CHECK(name && strcmp(name, "\xc3\xa9t\xc3\xa9\xf0\x9f\x98\x80/") == 0);
        cml_safetensors_close(f);
    }
}

/* Parses our writer's header independently of the reader: length, padding,
 * the JSON's text for each entry, and the data size. */
static void test_writer_header_independent_check(void) {
    cml_rng rng;
    cml_rng_init(&rng, 5);
    cml_tensor *x = random_tensor(2, (int64_t[]){3, 4}, CML_BF16, &rng);
    cml_tensor *y = random_tensor(0, NULL, CML_I64, &rng);
    const char *path = tmp_path("indep.safetensors");
    CHECK_OK(cml_safetensors_save(path, (cml_named_tensor[]){{"x", x}, {"y", y}}, 2, NULL, NULL, 0));
    size_t n = 0;
    unsigned char *b = read_all(path, &n);
    CHECK(b && n >= 8);
    if (b && n >= 8) {
        uint64_t h = 0;
        for (int i = 7; i >= 0; i--) h = h << 8 | b[i];
        CHECK(h % 8 == 0 && 8 + h + 24 + 8 == n);
        char *json = calloc(1, (size_t)h + 1);
        memcpy(json, b + 8, (size_t)h);
        const char *want = "{\"x\":{\"dtype\":\"BF16\",\"shape\":[3,4],\"data_offsets\":[0,24]},"
                           "\"y\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[24,32]}}";
        CHECK_MSG(strncmp(json, want, strlen(want)) == 0, "header: %s", json);
        for (size_t i = strlen(want); i < h; i++) CHECK(json[i] == ' ');
        CHECK(memcmp(b + 8 + h, cml_tensor_data(x), 24) == 0 && memcmp(b + 8 + h + 24, cml_tensor_data(y), 8) == 0);
        free(json);
    }
    free(b);
    cml_tensor_release_all((cml_tensor *[]){x, y}, 2);
}

/* open must reject the file: status want with a message naming the file and containing substr. */
static void expect_reject(const char *path, cml_status want, const char *substr, const char *what) {
    cml_safetensors *f = (cml_safetensors *)&f; /* poison: must come back NULL */
    cml_clear_error();
    cml_status s = cml_safetensors_open(path, &f);
    if (getenv("CML_TEST_VERBOSE")) printf("  %s: %s\n", what, cml_last_error());
    CHECK_MSG(s == want && f == NULL, "%s: got %s (%s)", what, cml_status_name(s), cml_last_error());
    CHECK_MSG(strstr(cml_last_error(), substr) && strstr(cml_last_error(), path), "%s: message \"%s\" lacks \"%s\"",
              what, cml_last_error(), substr);
    if (s == CML_OK) cml_safetensors_close(f);
}

static void test_truncated_and_extended(void) {
    cml_rng rng;
    cml_rng_init(&rng, 9);
    cml_tensor *x = random_tensor(2, (int64_t[]){2, 3}, CML_F32, &rng);
    cml_tensor *y = random_tensor(1, (int64_t[]){5}, CML_U8, &rng);
    const char *good = tmp_path("small.safetensors");
    CHECK_OK(cml_safetensors_save(good, (cml_named_tensor[]){{"x", x}, {"y", y}}, 2, (const char *[]){"k"},
                                  (const char *[]){"v"}, 1));
    size_t n = 0;
    unsigned char *b = read_all(good, &n);
    CHECK(b != NULL);
    char cut[512];
    snprintf(cut, sizeof cut, "%s", tmp_path("cut.safetensors"));
    for (size_t len = 0; b && len < n; len++) {
        write_all(cut, b, len);
        char what[64];
        snprintf(what, sizeof what, "cut at %zu of %zu", len, n);
        expect_reject(cut, CML_ERR_CORRUPT, "", what);
    }
    /* One byte too many: trailing data. */
    unsigned char *ext = malloc(n + 1);
    if (b && ext) {
        memcpy(ext, b, n);
        ext[n] = 0;
        write_all(cut, ext, n + 1);
        expect_reject(cut, CML_ERR_CORRUPT, "trailing", "one extra byte");
    }
    free(ext);
    free(b);
    cml_tensor_release_all((cml_tensor *[]){x, y}, 2);
}

/* Every header byte flipped in several ways: rejected (or, where the flip
 * happens to give another valid file, accepted), never a crash. */
static void test_flipped_header_bytes(void) {
    cml_rng rng;
    cml_rng_init(&rng, 11);
    cml_tensor *x = random_tensor(1, (int64_t[]){3}, CML_F16, &rng);
    cml_tensor *y = random_tensor(0, NULL, CML_I32, &rng);
    const char *good = tmp_path("flip_src.safetensors");
    CHECK_OK(cml_safetensors_save(good, (cml_named_tensor[]){{"x", x}, {"y", y}}, 2, (const char *[]){"m"},
                                  (const char *[]){"\xc3\xa9"}, 1));
    size_t n = 0;
    unsigned char *b = read_all(good, &n);
    char flip[512];
    snprintf(flip, sizeof flip, "%s", tmp_path("flip.safetensors"));
    const unsigned char masks[] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF};
    uint64_t h = 0;
    for (int i = 7; b && i >= 0; i--) h = h << 8 | b[i];
    int rejected = 0, accepted = 0;
    for (size_t pos = 0; b && pos < 8 + h; pos++) {
        for (size_t m = 0; m < sizeof masks; m++) {
            b[pos] ^= masks[m];
            write_all(flip, b, n);
            b[pos] ^= masks[m];
            cml_safetensors *f = NULL;
            cml_clear_error();
            cml_status s = cml_safetensors_open(flip, &f);
            if (s == CML_OK) {
                accepted++;
                for (int i = 0; i < cml_safetensors_count(f); i++) {
                    cml_tensor *t = cml_safetensors_get(f, cml_safetensors_name(f, i));
                    CHECK(t != NULL);
                    cml_tensor_release(t);
                }
                cml_safetensors_close(f);
            } else {
                rejected++;
                CHECK_MSG((s == CML_ERR_CORRUPT || s == CML_ERR_UNSUPPORTED) && f == NULL &&
                              strstr(cml_last_error(), flip),
                          "byte %zu ^ 0x%02x: %s \"%s\"", pos, masks[m], cml_status_name(s), cml_last_error());
            }
        }
    }
    if (getenv("CML_TEST_VERBOSE")) printf("  flips: %d rejected, %d accepted\n", rejected, accepted);
    CHECK_MSG(rejected > accepted, "rejected %d, accepted %d", rejected, accepted);
    free(b);
    cml_tensor_release_all((cml_tensor *[]){x, y}, 2);
}

typedef struct bad_case {
    const char *json;
    size_t data_len;
    cml_status status;
    const char *substr;
} bad_case;

#define E(name, dt, shape, off) "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":" off "}"

static void test_handmade_corrupt_headers(void) {
    static const bad_case cases[] = {
        {"{" E("a", "F33", "[2]", "[0,8]") "}", 8, CML_ERR_CORRUPT, "unknown dtype \"F33\""},
        {"{" E("a", "f32", "[2]", "[0,8]") "}", 8, CML_ERR_CORRUPT, "unknown dtype"},
        {"{" E("a", "", "[2]", "[0,8]") "}", 8, CML_ERR_CORRUPT, "unknown dtype"},
        {"{" E("a", "F64", "[1]", "[0,8]") "}", 8, CML_ERR_UNSUPPORTED, "F64"},
        {"{" E("a", "F32", "[200]", "[0,800]") "}", 8, CML_ERR_CORRUPT, "go beyond"},
        {"{" E("a", "F32", "[2]", "[0,8]") "," E("b", "F32", "[2]", "[4,12]") "}", 12, CML_ERR_CORRUPT, "overlap"},
        {"{" E("a", "F32", "[2]", "[0,8]") "," E("b", "F32", "[2]", "[12,20]") "}", 20, CML_ERR_CORRUPT, "gap"},
        {"{" E("a", "F32", "[2]", "[4,12]") "}", 12, CML_ERR_CORRUPT, "gap"},
        {"{" E("a", "F32", "[2]", "[0,8]") "}", 12, CML_ERR_CORRUPT, "trailing"},
        {"{}", 1, CML_ERR_CORRUPT, "trailing"},
        {"{" E("a", "F32", "[3]", "[0,8]") "}", 8, CML_ERR_CORRUPT, "need 12"},
        {"{" E("a", "I64", "[]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "need 8"},
        {"{" E("a", "F32", "[0]", "[8,0]") "}", 8, CML_ERR_CORRUPT, "end before"},
        {"{" E("a", "F32", "[2]", "[0,8,16]") "}", 8, CML_ERR_CORRUPT, "more than 2"},
        {"{" E("a", "F32", "[2]", "[0]") "}", 8, CML_ERR_CORRUPT, "2 entries"},
        {"{" E("a", "F32", "[1]", "[0,4]") "," E("a", "F32", "[1]", "[4,8]") "}", 8, CML_ERR_CORRUPT, "appears twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, CML_ERR_CORRUPT,
         "appears twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, CML_ERR_CORRUPT, "missing \"shape\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", 4, CML_ERR_CORRUPT,
         "unknown key"},
        {"{" E("a", "F32", "[-1]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "negative"},
        {"{" E("a", "F32", "[1.0]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "fraction"},
        {"{" E("a", "F32", "[1e0]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "exponent"},
        {"{" E("a", "F32", "[01]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "leading zeros"},
        {"{" E("a", "F32", "[1]", "[0,99999999999999999999]") "}", 4, CML_ERR_CORRUPT, "64 bits"},
        {"{" E("a", "F32", "[4611686018427387904,4611686018427387904]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "too large"},
        {"{" E("a", "F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4, CML_ERR_UNSUPPORTED, "more than 8"},
        {"{" E("a\\x", "F32", "[1]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "invalid escape"},
        {"{" E("a\\udc00", "F32", "[1]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "lone low surrogate"},
        {"{" E("a\\ud800x", "F32", "[1]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "low surrogate"},
        {"{" E("a\\u0000", "F32", "[1]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "NUL"},
        {"{" E("a\\u12", "F32", "[1]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "4 hex digits"},
        {"{" E("a\tb", "F32", "[1]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "control character"},
        {"{" E("a\xc3\x28", "F32", "[1]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "UTF-8"},
        {"{" E("a\xed\xa0\x80", "F32", "[1]", "[0,4]") "}", 4, CML_ERR_CORRUPT, "UTF-8"},
        {"{\"__metadata__\":{\"k\":1}}", 0, CML_ERR_CORRUPT, "must be a string"},
        {"{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, CML_ERR_CORRUPT, "metadata key \"k\" appears twice"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, CML_ERR_CORRUPT, "appears twice"},
        {"{\"__metadata__\":[]}", 0, CML_ERR_CORRUPT, "metadata object"},
        {"[]", 0, CML_ERR_CORRUPT, "JSON object"},
        {"{} x", 0, CML_ERR_CORRUPT, "after the JSON object"},
        {"{}{}", 0, CML_ERR_CORRUPT, "after the JSON object"},
        {"{\"a", 0, CML_ERR_CORRUPT, "unterminated string"},
        {"{\"a\" {", 0, CML_ERR_CORRUPT, "expected ':'"},
        {"{" E("a", "F32", "[1]", "[0,4]") " " E("b", "F32", "[1]", "[4,8]") "}", 8, CML_ERR_CORRUPT, "expected ','"},
        {"{" E("a", "F32", "[1]", "[0,4]") ",}", 4, CML_ERR_CORRUPT, "a string"},
        {"{\"a\":[1]}", 0, CML_ERR_CORRUPT, "tensor entry"},
        {"{\"a\":{\"dtype\":3}}", 0, CML_ERR_CORRUPT, "a string"},
        {"{\"a\":{\"shape\":[1,]}}", 0, CML_ERR_CORRUPT, "non-negative integer"},
        {"{\"a\":{\"shape\":[1 2]}}", 0, CML_ERR_CORRUPT, "expected ',' or ']'"},
        {"", 0, CML_ERR_CORRUPT, "unexpected end"},
        {"{", 0, CML_ERR_CORRUPT, "unexpected end"},
    };
    const char *path = tmp_path("bad.safetensors");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_raw(path, cases[i].json, cases[i].data_len, false);
        char what[64];
        snprintf(what, sizeof what, "case %zu", i);
        expect_reject(path, cases[i].status, cases[i].substr, what);
        static const char *const names_entry[] = {"dtype", "go beyond", "overlap", "gap", "need", "end before",
                                                  "2 entries", "missing", "unknown key", "negative", "fraction",
                                                  "exponent", "leading zeros", "64 bits", "too large", "more than"};
        for (size_t k = 0; k < sizeof names_entry / sizeof names_entry[0]; k++)
            if (strstr(cases[i].substr, names_entry[k]) || strstr(cases[i].substr, "F64"))
                CHECK_MSG(strstr(cml_last_error(), "entry \"") != NULL, "case %zu: the message names no entry: %s", i,
                          cml_last_error());
    }

    /* Header lengths: above the 100 MB limit, beyond the file, and not padded (accepted). */
    unsigned char buf[24] = {0};
    uint64_t big = 100000001;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(big >> (8 * i));
    write_all(path, buf, sizeof buf);
    expect_reject(path, CML_ERR_CORRUPT, "limit", "header length > 100 MB");
    memset(buf, 0, 8);
    buf[0] = 200;
    write_all(path, buf, sizeof buf);
    expect_reject(path, CML_ERR_CORRUPT, "larger than the 16 bytes", "header length > file");
    memset(buf, 0xFF, 8);
    write_all(path, buf, sizeof buf);
    expect_reject(path, CML_ERR_CORRUPT, "limit", "header length 2^64-1");
    write_raw(path, "{}", 0, true);
    cml_safetensors *f = NULL;
    CHECK_OK(cml_safetensors_open(path, &f));
    cml_safetensors_close(f);
}

static void test_missing_file_and_bad_args(void) {
    const char *path = tmp_path("does-not-exist.safetensors");
    cml_safetensors *f = NULL;
    CHECK_STATUS(cml_safetensors_open(path, &f), CML_ERR_IO, "No such file");
    CHECK(strstr(cml_last_error(), path) != NULL);
    CHECK_STATUS(cml_safetensors_open(TMP, &f), CML_ERR_IO, "not a regular file");
    CHECK_STATUS(cml_safetensors_open(NULL, &f), CML_ERR_INVALID_ARG, "path");
    CHECK_STATUS(cml_safetensors_open(path, NULL), CML_ERR_INVALID_ARG, "out");

    cml_tensor *x = cml_tensor_zeros(1, (int64_t[]){2}, CML_F32, CML_DEVICE_CPU);
    const char *out = tmp_path("args.safetensors");
    CHECK_STATUS(cml_safetensors_save(NULL, (cml_named_tensor[]){{"x", x}}, 1, NULL, NULL, 0), CML_ERR_INVALID_ARG,
                 "path");
    CHECK_STATUS(cml_safetensors_save(out, (cml_named_tensor[]){{"x", x}, {"x", x}}, 2, NULL, NULL, 0),
                 CML_ERR_INVALID_ARG, "\"x\" appears twice");
    CHECK_STATUS(cml_safetensors_save(out, (cml_named_tensor[]){{"x", NULL}}, 1, NULL, NULL, 0), CML_ERR_INVALID_ARG,
                 "is NULL");
    CHECK_STATUS(cml_safetensors_save(out, (cml_named_tensor[]){{NULL, x}}, 1, NULL, NULL, 0), CML_ERR_INVALID_ARG,
                 "name");
    CHECK_STATUS(cml_safetensors_save(out, (cml_named_tensor[]){{"__metadata__", x}}, 1, NULL, NULL, 0),
                 CML_ERR_INVALID_ARG, "__metadata__");
    CHECK_STATUS(cml_safetensors_save(out, (cml_named_tensor[]){{"\xff", x}}, 1, NULL, NULL, 0), CML_ERR_INVALID_ARG,
                 "UTF-8");
    CHECK_STATUS(cml_safetensors_save(out, NULL, 1, NULL, NULL, 0), CML_ERR_INVALID_ARG, "tensors");
    CHECK_STATUS(cml_safetensors_save(out, NULL, 0, (const char *[]){"k", "k"}, (const char *[]){"a", "b"}, 2),
                 CML_ERR_INVALID_ARG, "metadata key \"k\" appears twice");
    CHECK_STATUS(cml_safetensors_save(out, NULL, 0, (const char *[]){"k"}, (const char *[]){NULL}, 1),
                 CML_ERR_INVALID_ARG, "metadata value");
    CHECK(!file_exists(out));
    cml_tensor_release(x);
}

static void test_atomic_writes(void) {
    char tmp[600];
    cml_tensor *a = cml_tensor_full(1, (int64_t[]){4}, 1.0, CML_F32, CML_DEVICE_CPU);
    cml_tensor *b = cml_tensor_full(1, (int64_t[]){4}, 2.0, CML_F32, CML_DEVICE_CPU);
    char path[512];
    snprintf(path, sizeof path, "%s", tmp_path("atomic.safetensors"));
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK_OK(cml_safetensors_save(path, (cml_named_tensor[]){{"w", a}}, 1, NULL, NULL, 0));
    CHECK(file_exists(path) && !file_exists(tmp));
    size_t n_before = 0;
    unsigned char *before = read_all(path, &n_before);

    /* The temporary name is taken by a directory: the write fails, the old file stays. */
    CHECK(mkdir(tmp, 0755) == 0);
    CHECK_STATUS(cml_safetensors_save(path, (cml_named_tensor[]){{"w", b}}, 1, NULL, NULL, 0), CML_ERR_IO, path);
    CHECK(rmdir(tmp) == 0);
    size_t n_after = 0;
    unsigned char *after = read_all(path, &n_after);
    CHECK(before && after && n_before == n_after && memcmp(before, after, n_before) == 0);
    free(after);

    /* The rename fails (the destination is a non-empty directory): the temp file is removed. */
    char dirpath[512], inner[600];
    snprintf(dirpath, sizeof dirpath, "%s", tmp_path("atomic_dir.safetensors"));
    snprintf(inner, sizeof inner, "%s/keep", dirpath);
    mkdir(dirpath, 0755);
    write_all(inner, "x", 1);
    char tmp2[600];
    snprintf(tmp2, sizeof tmp2, "%s.tmp.%ld", dirpath, (long)getpid());
    CHECK_STATUS(cml_safetensors_save(dirpath, (cml_named_tensor[]){{"w", b}}, 1, NULL, NULL, 0), CML_ERR_IO, dirpath);
    CHECK(!file_exists(tmp2) && file_exists(inner));
    remove(inner);
    rmdir(dirpath);

    /* A path in a missing directory. */
    const char *missing = tmp_path("no/such/dir/x.safetensors");
    CHECK_STATUS(cml_safetensors_save(missing, (cml_named_tensor[]){{"w", b}}, 1, NULL, NULL, 0), CML_ERR_IO,
                 "No such file");
    CHECK(strstr(cml_last_error(), "no/such/dir/x.safetensors") != NULL);

    /* A directory that is not writable (permissions do not bind root). */
    if (geteuid() != 0) {
        char ro[512], ro_file[600];
        snprintf(ro, sizeof ro, "%s", tmp_path("readonly"));
        snprintf(ro_file, sizeof ro_file, "%s/m.safetensors", ro);
        mkdir(ro, 0755);
        CHECK_OK(cml_safetensors_save(ro_file, (cml_named_tensor[]){{"w", a}}, 1, NULL, NULL, 0));
        CHECK(chmod(ro, 0555) == 0);
        CHECK_STATUS(cml_safetensors_save(ro_file, (cml_named_tensor[]){{"w", b}}, 1, NULL, NULL, 0), CML_ERR_IO,
                     "Permission denied");
        chmod(ro, 0755);
        after = read_all(ro_file, &n_after);
        CHECK(before && after && n_before == n_after && memcmp(before, after, n_before) == 0);
        free(after);
        remove(ro_file);
        rmdir(ro);
    }
    free(before);
    cml_tensor_release_all((cml_tensor *[]){a, b}, 2);
}

int main(void) {
    mkdir(TMP, 0755);
    RUN(test_roundtrip_every_dtype);
    RUN(test_python_layout_byte_for_byte);
    RUN(test_writer_header_independent_check);
    RUN(test_truncated_and_extended);
    RUN(test_flipped_header_bytes);
    RUN(test_handmade_corrupt_headers);
    RUN(test_missing_file_and_bad_args);
    RUN(test_atomic_writes);
    return th_finish();
}
