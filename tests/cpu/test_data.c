/* Data: IDX parsing (raw and gzip, every corrupt-file path), MNIST loading
 * (synthetic and the real files), normalisation, and the batch iterator. */
#define _POSIX_C_SOURCE 200809L /* mkdir */
#include <sys/stat.h>
#include <zlib.h>

#include "harness.h"

#define TMP CML_TEST_TMP "/test_data_tmp"

/* ---- helpers -------------------------------------------------------------- */

static const char *tmp_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", TMP, name);
    return buf;
}

static void write_raw(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    CHECK(fwrite(bytes, 1, n, f) == n);
    fclose(f);
}

static void write_gz(const char *path, const void *bytes, size_t n) {
    gzFile f = gzopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    CHECK(n == 0 || gzwrite(f, bytes, (unsigned)n) == (int)n);
    CHECK(gzclose(f) == Z_OK);
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)size + 1);
    *n = fread(buf, 1, (size_t)size, f);
    fclose(f);
    return buf;
}

/* An IDX image: magic (0, 0, type, ndims), big-endian dims, then payload bytes. */
typedef struct idx_buf {
    unsigned char *data;
    size_t n;
} idx_buf;

static idx_buf make_idx(int type, int ndims, const uint32_t *dims, const void *payload, size_t payload_n) {
    idx_buf b;
    b.n = 4 + 4 * (size_t)ndims + payload_n;
    b.data = malloc(b.n + 1);
    b.data[0] = 0;
    b.data[1] = 0;
    b.data[2] = (unsigned char)type;
    b.data[3] = (unsigned char)ndims;
    for (int i = 0; i < ndims; i++) {
        unsigned char *p = b.data + 4 + 4 * i;
        p[0] = (unsigned char)(dims[i] >> 24);
        p[1] = (unsigned char)(dims[i] >> 16);
        p[2] = (unsigned char)(dims[i] >> 8);
        p[3] = (unsigned char)dims[i];
    }
    if (payload_n) memcpy(b.data + 4 + 4 * ndims, payload, payload_n);
    return b;
}

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Loads path and expects failure with status/fragment (and *out left NULL). */
#define CHECK_LOAD_FAILS(path, want, frag)                                  \
    do {                                                                    \
        cml_tensor *th_t = (cml_tensor *)1;                                 \
        CHECK_STATUS(cml_idx_load((path), &th_t), (want), (frag));          \
        CHECK(th_t == NULL);                                                \
        if (th_t != NULL && th_t != (cml_tensor *)1) cml_tensor_release(th_t); \
    } while (0)

/* ---- IDX ------------------------------------------------------------------ */

static void test_idx_roundtrip(void) {
    char p[512];
    uint8_t u8[24];
    for (int i = 0; i < 24; i++) u8[i] = (uint8_t)(i * 11);
    const uint32_t dims3[3] = {2, 3, 4};
    idx_buf b = make_idx(0x08, 3, dims3, u8, sizeof u8);
    const char *names[2] = {"u8.idx", "u8.idx.gz"};
    write_raw(tmp_path(p, sizeof p, names[0]), b.data, b.n);
    write_gz(tmp_path(p, sizeof p, names[1]), b.data, b.n);
    free(b.data);
    for (int k = 0; k < 2; k++) {
        cml_tensor *t = NULL;
        CHECK_OK(cml_idx_load(tmp_path(p, sizeof p, names[k]), &t));
        CHECK_NOT_NULL(t);
        if (!t) continue;
        CHECK(cml_tensor_dtype(t) == CML_U8 && cml_tensor_ndim(t) == 3);
        CHECK(cml_tensor_device(t).type == CML_CPU);
        CHECK(cml_tensor_size(t, 0) == 2 && cml_tensor_size(t, 1) == 3 && cml_tensor_size(t, 2) == 4);
        CHECK(memcmp(cml_tensor_data(t), u8, sizeof u8) == 0);
        cml_tensor_release(t);
    }

    /* i32, big-endian in the file. */
    const int32_t ivals[5] = {0, 1, -1, 0x12345678, INT32_MIN};
    unsigned char ibytes[20];
    for (int i = 0; i < 5; i++) put_be32(ibytes + 4 * i, (uint32_t)ivals[i]);
    const uint32_t dim5 = 5;
    b = make_idx(0x0C, 1, &dim5, ibytes, sizeof ibytes);
    write_gz(tmp_path(p, sizeof p, "i32.idx.gz"), b.data, b.n);
    free(b.data);
    cml_tensor *t = NULL;
    CHECK_OK(cml_idx_load(p, &t));
    if (t) {
        CHECK(cml_tensor_dtype(t) == CML_I32 && cml_tensor_ndim(t) == 1 && cml_tensor_size(t, 0) == 5);
        CHECK(memcmp(cml_tensor_data(t), ivals, sizeof ivals) == 0);
        cml_tensor_release(t);
    }

    /* f32, big-endian, 4-d. */
    const float fvals[4] = {1.5f, -2.25f, 0.0f, 3.0e-20f};
    unsigned char fbytes[16];
    for (int i = 0; i < 4; i++) {
        uint32_t w;
        memcpy(&w, &fvals[i], 4);
        put_be32(fbytes + 4 * i, w);
    }
    const uint32_t dims4[4] = {1, 2, 1, 2};
    b = make_idx(0x0D, 4, dims4, fbytes, sizeof fbytes);
    write_raw(tmp_path(p, sizeof p, "f32.idx"), b.data, b.n);
    free(b.data);
    t = NULL;
    CHECK_OK(cml_idx_load(p, &t));
    if (t) {
        CHECK(cml_tensor_dtype(t) == CML_F32 && cml_tensor_ndim(t) == 4 && cml_tensor_numel(t) == 4);
        CHECK(cml_tensor_size(t, 1) == 2 && cml_tensor_size(t, 3) == 2);
        CHECK(memcmp(cml_tensor_data(t), fvals, sizeof fvals) == 0);
        cml_tensor_release(t);
    }

    CHECK_STATUS(cml_idx_load(p, NULL), CML_ERR_INVALID_ARG, "out must not be NULL");
    CHECK_STATUS(cml_idx_load(NULL, &t), CML_ERR_INVALID_ARG, "path must not be NULL");
}

/* Writes bytes raw and gzip-compressed, expecting the same failure from both. */
static void check_both_fail(const char *name, const unsigned char *bytes, size_t n, cml_status want,
                            const char *frag) {
    char p[512], gz[128];
    snprintf(gz, sizeof gz, "%s.gz", name);
    write_raw(tmp_path(p, sizeof p, name), bytes, n);
    CHECK_LOAD_FAILS(p, want, frag);
    CHECK_MSG(strstr(cml_last_error(), p) != NULL, "message does not name the file: %s", cml_last_error());
    write_gz(tmp_path(p, sizeof p, gz), bytes, n);
    CHECK_LOAD_FAILS(p, want, frag);
    CHECK_MSG(strstr(cml_last_error(), p) != NULL, "message does not name the file: %s", cml_last_error());
}

static void test_idx_corrupt_header(void) {
    uint8_t px[6] = {1, 2, 3, 4, 5, 6};
    const uint32_t dims[2] = {2, 3};
    idx_buf b = make_idx(0x08, 2, dims, px, sizeof px);

    b.data[0] = 1;
    check_both_fail("bad_magic.idx", b.data, b.n, CML_ERR_CORRUPT, "bad magic 0x01000802");
    b.data[0] = 0;
    b.data[2] = 0x0E; /* f64: a valid IDX type we do not read */
    check_both_fail("bad_type.idx", b.data, b.n, CML_ERR_CORRUPT, "unsupported IDX type code 0x0e");
    b.data[2] = 0x09;
    check_both_fail("bad_type2.idx", b.data, b.n, CML_ERR_CORRUPT, "unsupported IDX type code 0x09");
    b.data[2] = 0x08;
    b.data[3] = 0;
    check_both_fail("ndims0.idx", b.data, b.n, CML_ERR_CORRUPT, "ndims=0 must be in [1, 4]");
    b.data[3] = 5;
    check_both_fail("ndims5.idx", b.data, b.n, CML_ERR_CORRUPT, "ndims=5 must be in [1, 4]");
    b.data[3] = 2;
    free(b.data);

    const uint32_t zero_dims[2] = {2, 0};
    b = make_idx(0x08, 2, zero_dims, NULL, 0);
    check_both_fail("zero_dim.idx", b.data, b.n, CML_ERR_CORRUPT, "dimension 1 is 0, must be in [1, 2^31-1]");
    free(b.data);
    const uint32_t big_dims[1] = {0x80000000u};
    b = make_idx(0x08, 1, big_dims, NULL, 0);
    check_both_fail("big_dim.idx", b.data, b.n, CML_ERR_CORRUPT, "dimension 0 is 2147483648");
    free(b.data);

    /* Truncated header: inside the magic, and inside the dims. */
    b = make_idx(0x08, 2, dims, px, sizeof px);
    check_both_fail("short_magic.idx", b.data, 3, CML_ERR_CORRUPT,
                    "is truncated: expected 4 bytes of header, found 3");
    check_both_fail("short_dims.idx", b.data, 10, CML_ERR_CORRUPT,
                    "is truncated: expected 8 bytes of dims, found 6");
    check_both_fail("empty.idx", b.data, 0, CML_ERR_CORRUPT, "expected 4 bytes of header, found 0");
    free(b.data);

    /* Huge dims in a tiny file: refused before allocating. */
    const uint32_t huge[3] = {0x7fffffffu, 0x7fffffffu, 1};
    b = make_idx(0x08, 3, huge, px, sizeof px);
    char p[512];
    write_raw(tmp_path(p, sizeof p, "huge.idx"), b.data, b.n);
    CHECK_LOAD_FAILS(p, CML_ERR_CORRUPT, "expected 4611686014132420609 bytes of payload, found 6");
    write_gz(tmp_path(p, sizeof p, "huge.idx.gz"), b.data, b.n);
    CHECK_LOAD_FAILS(p, CML_ERR_CORRUPT, "but a gzip file of");
    free(b.data);
    const uint32_t overflow[4] = {0x7fffffffu, 0x7fffffffu, 0x7fffffffu, 2};
    b = make_idx(0x0D, 4, overflow, NULL, 0);
    check_both_fail("overflow.idx", b.data, b.n, CML_ERR_CORRUPT, "more than 2^63 bytes");
    free(b.data);
}

static void test_idx_corrupt_payload(void) {
    uint8_t px[24];
    for (int i = 0; i < 24; i++) px[i] = (uint8_t)i;
    const uint32_t dims[2] = {4, 6};
    idx_buf b = make_idx(0x08, 2, dims, px, sizeof px);
    check_both_fail("short_payload.idx", b.data, b.n - 4, CML_ERR_CORRUPT,
                    "is truncated: expected 24 bytes of payload, found 20");

    /* Trailing garbage after the payload. */
    unsigned char *longer = malloc(b.n + 3);
    memcpy(longer, b.data, b.n);
    memcpy(longer + b.n, "xyz", 3);
    check_both_fail("trailing.idx", longer, b.n + 3, CML_ERR_CORRUPT,
                    "3 trailing bytes after the payload (expected 36 bytes in all, found 39)");
    free(longer);
    free(b.data);

    /* A gzip file cut in the middle of its compressed stream: a payload that
     * does not compress (Philox bytes), so the cut lands inside the data. */
    enum { NPX = 100000 };
    uint8_t *big = malloc(NPX);
    cml_rng r;
    cml_rng_init(&r, 3);
    for (int i = 0; i < NPX; i++) big[i] = (uint8_t)cml_rng_u32(&r);
    const uint32_t bdims[2] = {100, 1000};
    b = make_idx(0x08, 2, bdims, big, NPX);
    char p[512], cut[512];
    write_gz(tmp_path(p, sizeof p, "whole.idx.gz"), b.data, b.n);
    cml_tensor *t = NULL;
    CHECK_OK(cml_idx_load(p, &t));
    if (t) CHECK(memcmp(cml_tensor_data(t), big, NPX) == 0);
    cml_tensor_release(t);
    size_t gz_n = 0;
    unsigned char *gz = read_all(p, &gz_n);
    CHECK(gz != NULL && gz_n > NPX / 2);
    if (gz) {
        write_raw(tmp_path(cut, sizeof cut, "cut_middle.idx.gz"), gz, gz_n / 2);
        CHECK_LOAD_FAILS(cut, CML_ERR_CORRUPT, "is truncated: expected 100000 bytes of payload, found ");
        CHECK(strstr(cml_last_error(), "cut_middle.idx.gz") != NULL);
        CHECK(strstr(cml_last_error(), "gzip stream ends early") != NULL);
        /* Cut inside the 8-byte trailer (CRC32, ISIZE): the payload is whole. */
        write_raw(tmp_path(cut, sizeof cut, "cut_trailer.idx.gz"), gz, gz_n - 3);
        CHECK_LOAD_FAILS(cut, CML_ERR_CORRUPT, "gzip stream is truncated or corrupt after the 100012 bytes");
        /* A flipped bit in the stored CRC. */
        gz[gz_n - 6] ^= 0x10;
        write_raw(tmp_path(cut, sizeof cut, "bad_crc.idx.gz"), gz, gz_n);
        CHECK_LOAD_FAILS(cut, CML_ERR_CORRUPT, "incorrect data check");
        free(gz);
    }
    free(big);
    free(b.data);
}

static void test_idx_missing(void) {
    CHECK_LOAD_FAILS(TMP "/no_such_file.idx", CML_ERR_IO, "cannot open \"" TMP "/no_such_file.idx\": No such file");
    CHECK(strstr(cml_last_error(), "check the path") != NULL);
    CHECK_LOAD_FAILS(TMP, CML_ERR_IO, "Is a directory");
}

/* ---- MNIST ---------------------------------------------------------------- */

/* Writes <dir>/<prefix>-{images-idx3,labels-idx1}-ubyte[.gz] with n images of
 * shape (rows, 28) and the given labels (nl of them). */
static void write_mnist(const char *dir, const char *prefix, bool gz, uint32_t n, uint32_t rows,
                        const uint8_t *labels, uint32_t nl) {
    char p[512];
    uint8_t *px = calloc((size_t)n * rows * 28 + 1, 1);
    for (size_t i = 0; i < (size_t)n * rows * 28; i++) px[i] = (uint8_t)(i * 7);
    const uint32_t idims[3] = {n, rows, 28};
    idx_buf b = make_idx(0x08, 3, idims, px, (size_t)n * rows * 28);
    snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte%s", dir, prefix, gz ? ".gz" : "");
    (gz ? write_gz : write_raw)(p, b.data, b.n);
    free(b.data);
    free(px);
    b = make_idx(0x08, 1, &nl, labels, nl);
    snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gz ? ".gz" : "");
    (gz ? write_gz : write_raw)(p, b.data, b.n);
    free(b.data);
}

static void remove_mnist(const char *dir, const char *prefix) {
    static const char *const kinds[2] = {"images-idx3", "labels-idx1"};
    char p[512];
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s-%s-ubyte", dir, prefix, kinds[k]);
        remove(p);
        snprintf(p, sizeof p, "%s/%s-%s-ubyte.gz", dir, prefix, kinds[k]);
        remove(p);
    }
}

static void test_mnist_synthetic(void) {
    const char *dir = TMP "/mnist";
    mkdir(dir, 0755);
    remove_mnist(dir, "train");
    remove_mnist(dir, "t10k");
    cml_tensor *img = (cml_tensor *)1, *lbl = (cml_tensor *)1;

    CHECK_STATUS(cml_mnist_load(dir, true, &img, &lbl), CML_ERR_IO,
                 "looked for train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz]");
    CHECK(img == NULL && lbl == NULL);
    CHECK(strstr(cml_last_error(), "--data DIR") != NULL);
    CHECK(strstr(cml_last_error(), "apt-get install dataset-fashion-mnist") != NULL);
    CHECK(strstr(cml_last_error(), "/usr/share/datasets/fashion-mnist") != NULL);
    CHECK_STATUS(cml_mnist_load(TMP "/nonexistent_dir", false, &img, &lbl), CML_ERR_IO,
                 "looked for t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz]");

    const uint8_t good[3] = {7, 0, 9};
    write_mnist(dir, "t10k", true, 3, 28, good, 3);
    CHECK_OK(cml_mnist_load(dir, false, &img, &lbl));
    if (img && lbl) {
        CHECK(cml_tensor_dtype(img) == CML_U8 && cml_tensor_ndim(img) == 3);
        CHECK(cml_tensor_size(img, 0) == 3 && cml_tensor_size(img, 1) == 28 && cml_tensor_size(img, 2) == 28);
        CHECK(((const uint8_t *)cml_tensor_data(img))[5] == 35);
        CHECK(cml_tensor_dtype(lbl) == CML_I64 && cml_tensor_ndim(lbl) == 1 && cml_tensor_size(lbl, 0) == 3);
        const int64_t *l = cml_tensor_data(lbl);
        CHECK(l[0] == 7 && l[1] == 0 && l[2] == 9);
    }
    cml_tensor_release(img);
    cml_tensor_release(lbl);
    /* The train files are still missing; only the missing one is named. */
    write_mnist(dir, "train", false, 3, 28, good, 3);
    remove(TMP "/mnist/train-labels-idx1-ubyte");
    CHECK_STATUS(cml_mnist_load(dir, true, &img, &lbl), CML_ERR_IO, "looked for train-labels-idx1-ubyte[.gz];");
    CHECK(strstr(cml_last_error(), "train-images") == NULL);

    const uint8_t bad[3] = {1, 2, 10};
    write_mnist(dir, "train", false, 3, 28, bad, 3);
    CHECK_STATUS(cml_mnist_load(dir, true, &img, &lbl), CML_ERR_CORRUPT, "label 2 has value 10, must be in [0, 9]");
    CHECK(strstr(cml_last_error(), "train-labels-idx1-ubyte") != NULL);
    CHECK(img == NULL && lbl == NULL);

    write_mnist(dir, "train", false, 3, 28, good, 2);
    CHECK_STATUS(cml_mnist_load(dir, true, &img, &lbl), CML_ERR_CORRUPT, "2 labels for 3 images");

    write_mnist(dir, "train", false, 3, 27, good, 3);
    CHECK_STATUS(cml_mnist_load(dir, true, &img, &lbl), CML_ERR_CORRUPT,
                 "images must be u8 (N, 28, 28), found u8[3, 27, 28]");

    /* Errors of the IDX layer come through unchanged. */
    remove_mnist(dir, "train");
    write_mnist(dir, "train", true, 3, 28, good, 3);
    char p[512];
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", dir);
    write_raw(p, "\0\0\x08\x01\0\0\0\x03\x01", 9);
    CHECK_STATUS(cml_mnist_load(dir, true, &img, &lbl), CML_ERR_CORRUPT,
                 "is truncated: expected 3 bytes of payload, found 1");
    CHECK_STATUS(cml_mnist_load(NULL, true, &img, &lbl), CML_ERR_INVALID_ARG, "dir must not be NULL");
    remove_mnist(dir, "train");
    remove_mnist(dir, "t10k");
}

static bool dir_has(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* Known facts of the published data sets (class counts as in the literature). */
static void check_real(const char *dir, bool train, int64_t n, const int64_t first[10], const int64_t counts[10],
                       int64_t nonzero0) {
    cml_tensor *img = NULL, *lbl = NULL;
    CHECK_OK(cml_mnist_load(dir, train, &img, &lbl));
    if (!img || !lbl) return;
    CHECK(cml_tensor_dtype(img) == CML_U8 && cml_tensor_ndim(img) == 3);
    CHECK(cml_tensor_size(img, 0) == n && cml_tensor_size(img, 1) == 28 && cml_tensor_size(img, 2) == 28);
    CHECK(cml_tensor_dtype(lbl) == CML_I64 && cml_tensor_size(lbl, 0) == n);
    const int64_t *l = cml_tensor_data(lbl);
    for (int i = 0; i < 10; i++) CHECK_MSG(l[i] == first[i], "label %d = %lld", i, (long long)l[i]);
    int64_t hist[10] = {0};
    for (int64_t i = 0; i < n; i++) hist[l[i]]++;
    for (int k = 0; k < 10; k++) CHECK_MSG(hist[k] == counts[k], "class %d: %lld", k, (long long)hist[k]);
    const uint8_t *px = cml_tensor_data(img);
    int64_t nz = 0, maxv = 0;
    for (int i = 0; i < 784; i++) nz += px[i] != 0;
    for (int64_t i = 0; i < n * 784; i++) maxv = px[i] > maxv ? px[i] : maxv;
    CHECK_MSG(nz == nonzero0, "image 0 has %lld nonzero pixels", (long long)nz);
    CHECK(maxv == 255);

    cml_tensor *x = cml_normalize_u8(img, 0.1307f, 0.3081f, true);
    CHECK_NOT_NULL(x);
    if (x) {
        CHECK(cml_tensor_ndim(x) == 2 && cml_tensor_size(x, 0) == n && cml_tensor_size(x, 1) == 784);
        const float *xv = cml_tensor_data(x);
        CHECK_NEAR(xv[0], -0.1307 / 0.3081, 1e-5);
        CHECK_NEAR(xv[1000], (px[1000] / 255.0 - 0.1307) / 0.3081, 1e-5);
    }
    cml_tensor_release(x);
    cml_tensor_release(img);
    cml_tensor_release(lbl);
}

static void test_mnist_real(void) {
    const char *dir = CML_TEST_DATA "/mnist";
    if (!dir_has(CML_TEST_DATA "/mnist/train-images-idx3-ubyte.gz")) {
        printf("  (skipped: no MNIST in %s)\n", dir);
        return;
    }
    static const int64_t train_first[10] = {5, 0, 4, 1, 9, 2, 1, 3, 1, 4};
    static const int64_t train_counts[10] = {5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949};
    static const int64_t test_first[10] = {7, 2, 1, 0, 4, 1, 4, 9, 5, 9};
    static const int64_t test_counts[10] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
    check_real(dir, true, 60000, train_first, train_counts, 166);
    check_real(dir, false, 10000, test_first, test_counts, 116);
}

static void test_fashion_mnist_real(void) {
    const char *dir = "/usr/share/datasets/fashion-mnist";
    if (!dir_has("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")) {
        printf("  (skipped: dataset-fashion-mnist is not installed)\n");
        return;
    }
    static const int64_t first[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    static const int64_t counts[10] = {1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000};
    check_real(dir, false, 10000, first, counts, 267);
}

/* ---- normalisation ---------------------------------------------------------- */

static void test_normalize(void) {
    uint8_t v[12];
    for (int i = 0; i < 12; i++) v[i] = (uint8_t)(i * 23);
    const int64_t shape[3] = {2, 3, 2};
    cml_tensor *u = cml_tensor_from_host(v, 3, shape, CML_U8, CML_DEVICE_CPU);
    CHECK_NOT_NULL(u);
    if (!u) return;
    cml_tensor *y = cml_normalize_u8(u, 0.5f, 0.25f, false);
    CHECK_NOT_NULL(y);
    if (y) {
        CHECK(cml_tensor_dtype(y) == CML_F32 && cml_tensor_ndim(y) == 3 && cml_tensor_size(y, 1) == 3);
        const float *yv = cml_tensor_data(y);
        for (int i = 0; i < 12; i++) CHECK_NEAR(yv[i], (v[i] / 255.0 - 0.5) / 0.25, 1e-6);
    }
    cml_tensor_release(y);
    y = cml_normalize_u8(u, 0.0f, 1.0f, true);
    if (y) {
        CHECK(cml_tensor_ndim(y) == 2 && cml_tensor_size(y, 0) == 2 && cml_tensor_size(y, 1) == 6);
        CHECK_NEAR(((const float *)cml_tensor_data(y))[11], 253 / 255.0, 1e-6);
    }
    cml_tensor_release(y);

    /* A non-contiguous view is read in its logical order. */
    cml_tensor *tr = cml_transpose(u, 0, 2); /* (2, 3, 2) */
    y = cml_normalize_u8(tr, 0.0f, 1.0f, true);
    CHECK_NOT_NULL(y);
    if (y) {
        const float *yv = cml_tensor_data(y);
        /* tr[i][j][k] = u[k][j][i] = v[k*6 + j*2 + i]; row-major in (i, j, k). */
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 2; k++) CHECK_NEAR(yv[i * 6 + j * 2 + k], v[k * 6 + j * 2 + i] / 255.0, 1e-6);
    }
    cml_tensor_release(y);
    cml_tensor_release(tr);

    cml_clear_error();
    CHECK(cml_normalize_u8(u, 0.0f, 0.0f, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "std=0 must be nonzero");
    cml_tensor *f = cml_tensor_zeros(3, shape, CML_F32, CML_DEVICE_CPU);
    CHECK(cml_normalize_u8(f, 0.0f, 1.0f, false) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "images must be u8, got f32[2, 3, 2]");
    cml_tensor_release(f);
    cml_clear_error();
    CHECK(cml_normalize_u8(NULL, 0.0f, 1.0f, false) == NULL);
    CHECK(cml_last_status() == CML_OK);
    cml_tensor_release(u);
}

/* ---- batch iterator ---------------------------------------------------------- */

/* Runs one epoch, appending indices to order (room for n); returns the batch count. */
static int64_t run_epoch(cml_batch_iter *it, int64_t n, int64_t batch, int64_t *order, int64_t *count,
                         int64_t *last_size) {
    int64_t batches = 0;
    *count = 0;
    cml_clear_error();
    const cml_tensor *b;
    while ((b = cml_batch_iter_next(it)) != NULL) {
        CHECK(cml_tensor_dtype(b) == CML_I64 && cml_tensor_ndim(b) == 1);
        CHECK(cml_tensor_device(b).type == CML_CPU);
        int64_t len = cml_tensor_size(b, 0);
        CHECK(len >= 1 && len <= batch && *count + len <= n);
        if (len < 1 || *count + len > n) break;
        memcpy(order + *count, cml_tensor_data(b), (size_t)len * sizeof(int64_t));
        *count += len;
        *last_size = len;
        batches++;
    }
    CHECK(cml_last_status() == CML_OK);
    return batches;
}

/* count distinct indices, all in [0, n). */
static bool all_distinct(const int64_t *order, int64_t count, int64_t n) {
    char *seen = calloc((size_t)n + 1, 1);
    bool ok = true;
    for (int64_t i = 0; i < count && ok; i++) {
        ok = order[i] >= 0 && order[i] < n && !seen[order[i]];
        if (ok) seen[order[i]] = 1;
    }
    free(seen);
    return ok;
}

static bool is_permutation(const int64_t *order, int64_t n) { return all_distinct(order, n, n); }

static void test_batch_iter_counts(void) {
    int64_t order[10], count = 0, last = 0;
    cml_batch_iter *it = cml_batch_iter_create(10, 3, false, false, 1);
    CHECK_NOT_NULL(it);
    if (!it) return;
    CHECK(cml_batch_iter_batches(it) == 4);
    CHECK(run_epoch(it, 10, 3, order, &count, &last) == 4);
    CHECK(count == 10 && last == 1);
    for (int i = 0; i < 10; i++) CHECK(order[i] == i); /* no shuffle: in order */
    CHECK(cml_batch_iter_next(it) == NULL);            /* stays at the end */
    cml_batch_iter_reset(it);
    CHECK(run_epoch(it, 10, 3, order, &count, &last) == 4 && count == 10);
    cml_batch_iter_destroy(it);

    it = cml_batch_iter_create(10, 3, true, true, 1);
    CHECK(cml_batch_iter_batches(it) == 3);
    CHECK(run_epoch(it, 10, 3, order, &count, &last) == 3);
    CHECK(count == 9 && last == 3);
    CHECK(all_distinct(order, 9, 10));
    cml_batch_iter_destroy(it);

    /* Exact multiple: drop_last changes nothing. */
    it = cml_batch_iter_create(12, 4, true, true, 1);
    CHECK(cml_batch_iter_batches(it) == 3);
    int64_t order12[12];
    CHECK(run_epoch(it, 12, 4, order12, &count, &last) == 3 && count == 12 && is_permutation(order12, 12));
    cml_batch_iter_destroy(it);

    /* batch > n: one short batch, or none with drop_last. */
    it = cml_batch_iter_create(5, 8, true, false, 1);
    CHECK(cml_batch_iter_batches(it) == 1);
    CHECK(run_epoch(it, 5, 8, order, &count, &last) == 1 && count == 5 && is_permutation(order, 5));
    cml_batch_iter_destroy(it);
    it = cml_batch_iter_create(5, 8, true, true, 1);
    CHECK(cml_batch_iter_batches(it) == 0 && cml_batch_iter_next(it) == NULL);
    cml_batch_iter_destroy(it);
    it = cml_batch_iter_create(0, 8, true, false, 1);
    CHECK(it != NULL && cml_batch_iter_batches(it) == 0 && cml_batch_iter_next(it) == NULL);
    cml_batch_iter_destroy(it);

    cml_clear_error();
    CHECK(cml_batch_iter_create(10, 0, true, false, 1) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "batch=0 >= 1");
    CHECK(cml_batch_iter_create(-1, 2, true, false, 1) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "n=-1 must be >= 0");
    cml_batch_iter_destroy(NULL);
}

static void test_batch_iter_shuffle(void) {
    enum { N = 1000, B = 64, EPOCHS = 3 };
    int64_t *a = malloc(sizeof(int64_t) * N * EPOCHS), *b = malloc(sizeof(int64_t) * N * EPOCHS);
    int64_t *c = malloc(sizeof(int64_t) * N);
    int64_t count = 0, last = 0;
    cml_batch_iter *ia = cml_batch_iter_create(N, B, true, false, 42);
    cml_batch_iter *ib = cml_batch_iter_create(N, B, true, false, 42);
    cml_batch_iter *ic = cml_batch_iter_create(N, B, true, false, 43);
    for (int e = 0; e < EPOCHS; e++) {
        if (e > 0) {
            cml_batch_iter_reset(ia);
            cml_batch_iter_reset(ib);
        }
        CHECK(run_epoch(ia, N, B, a + e * N, &count, &last) == 16 && count == N && last == N - 15 * B);
        CHECK(is_permutation(a + e * N, N));
        CHECK(run_epoch(ib, N, B, b + e * N, &count, &last) == 16);
    }
    CHECK(memcmp(a, b, sizeof(int64_t) * N * EPOCHS) == 0);       /* same seed: same epochs */
    CHECK(memcmp(a, a + N, sizeof(int64_t) * N) != 0);            /* epochs differ */
    CHECK(memcmp(a + N, a + 2 * N, sizeof(int64_t) * N) != 0);
    run_epoch(ic, N, B, c, &count, &last);
    CHECK(memcmp(a, c, sizeof(int64_t) * N) != 0);                /* seeds differ */
    int fixed = 0;
    for (int i = 0; i < N; i++) fixed += a[i] == i;
    CHECK(fixed < 10); /* a shuffle, not the identity (expected 1 fixed point) */
    /* reset mid-epoch starts a fresh, complete epoch */
    cml_batch_iter_reset(ia);
    CHECK(cml_batch_iter_next(ia) != NULL);
    cml_batch_iter_reset(ia);
    CHECK(run_epoch(ia, N, B, a, &count, &last) == 16 && is_permutation(a, N));
    cml_batch_iter_destroy(ia);
    cml_batch_iter_destroy(ib);
    cml_batch_iter_destroy(ic);
    free(a);
    free(b);
    free(c);

    /* Fisher-Yates is uniform: the 6 orders of 3 items over 60000 epochs
     * (chi-square, 5 degrees of freedom, p = 0.001 critical value 20.5). */
    cml_batch_iter *it = cml_batch_iter_create(3, 3, true, false, 7);
    int64_t hist[6] = {0};
    for (int e = 0; e < 60000; e++) {
        if (e) cml_batch_iter_reset(it);
        const cml_tensor *t = cml_batch_iter_next(it);
        if (!t) break;
        const int64_t *o = cml_tensor_data(t);
        hist[o[0] * 2 + (o[1] > o[2])]++;
    }
    double chi2 = 0;
    for (int k = 0; k < 6; k++) chi2 += (hist[k] - 10000.0) * (hist[k] - 10000.0) / 10000.0;
    CHECK_MSG(chi2 < 20.5, "chi2 = %g", chi2);
    cml_batch_iter_destroy(it);
}

int main(void) {
    mkdir(TMP, 0755);
    RUN(test_idx_roundtrip);
    RUN(test_idx_corrupt_header);
    RUN(test_idx_corrupt_payload);
    RUN(test_idx_missing);
    RUN(test_mnist_synthetic);
    RUN(test_mnist_real);
    RUN(test_fashion_mnist_real);
    RUN(test_normalize);
    RUN(test_batch_iter_counts);
    RUN(test_batch_iter_shuffle);
    return th_finish();
}
