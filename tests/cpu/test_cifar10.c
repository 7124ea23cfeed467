/* CIFAR-10 binary reader: the real files (counts, first labels and pixels),
 * hand-written files, and truncated / corrupt / missing files written to
 * CML_TEST_TMP. */
#include "harness.h"

#define REC 3073

static const char *tmp_path(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/cifar10_%s", CML_TEST_TMP, name);
    return buf;
}

/* Writes n records: record i has label labels[i] and pixel p = (i * 7 + p) & 255. */
static void write_records(const char *path, const uint8_t *labels, int n, size_t extra_bytes) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    uint8_t rec[REC];
    for (int i = 0; i < n; i++) {
        rec[0] = labels[i];
        for (int p = 0; p < 3072; p++) rec[1 + p] = (uint8_t)((i * 7 + p) & 255);
        fwrite(rec, 1, REC, f);
    }
    for (size_t i = 0; i < extra_bytes; i++) fputc(1, f);
    fclose(f);
}

static bool exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static void test_real_files(void) {
    const char *train = CML_TEST_DATA "/cifar10/data_batch_1.bin", *test = CML_TEST_DATA "/cifar10/test_batch.first1000.bin";
    if (!exists(train) || !exists(test)) {
        printf("  (skipped: no CIFAR-10 in %s)\n", CML_TEST_DATA "/cifar10");
        return;
    }
    cml_tensor *x = NULL, *y = NULL;
    CHECK_OK(cml_cifar10_load(&train, 1, &x, &y));
    if (!x || !y) return;
    CHECK(cml_tensor_dtype(x) == CML_U8 && cml_tensor_ndim(x) == 4);
    CHECK(cml_tensor_size(x, 0) == 10000 && cml_tensor_size(x, 1) == 3 && cml_tensor_size(x, 2) == 32 &&
          cml_tensor_size(x, 3) == 32);
    CHECK(cml_tensor_dtype(y) == CML_I64 && cml_tensor_ndim(y) == 1 && cml_tensor_size(y, 0) == 10000);
    const int64_t *lab = cml_tensor_data(y);
    const uint8_t *px = cml_tensor_data(x);
    CHECK(lab[0] == 6); /* a frog */
    static const uint8_t red0[10] = {59, 43, 50, 68, 98, 119, 139, 145, 149, 149};
    CHECK(memcmp(px, red0, 10) == 0);
    int64_t counts[10] = {0};
    for (int64_t i = 0; i < 10000; i++) counts[lab[i]]++;
    for (int c = 0; c < 10; c++) CHECK_MSG(counts[c] > 900 && counts[c] < 1100, "class %d: %lld", c, (long long)counts[c]);
    cml_tensor_release_all((cml_tensor *[]){x, y}, 2);

    const char *both[2] = {train, test};
    CHECK_OK(cml_cifar10_load(both, 2, &x, &y));
    if (!x || !y) return;
    CHECK(cml_tensor_size(x, 0) == 11000 && cml_tensor_size(y, 0) == 11000);
    static const int64_t first_test[10] = {3, 8, 8, 0, 6, 6, 1, 6, 3, 1};
    lab = cml_tensor_data(y);
    CHECK(lab[0] == 6 && memcmp(lab + 10000, first_test, sizeof first_test) == 0);
    CHECK(memcmp(cml_tensor_data(x), red0, 10) == 0);
    cml_tensor_release_all((cml_tensor *[]){x, y}, 2);
}

static void test_written_files(void) {
    char p1[512], p2[512];
    uint8_t l1[3] = {0, 9, 4}, l2[2] = {7, 1};
    write_records(tmp_path("a.bin", p1, sizeof p1), l1, 3, 0);
    write_records(tmp_path("b.bin", p2, sizeof p2), l2, 2, 0);
    const char *paths[2] = {p1, p2};
    cml_tensor *x = NULL, *y = NULL;
    CHECK_OK(cml_cifar10_load(paths, 2, &x, &y));
    if (!x || !y) return;
    CHECK(cml_tensor_size(x, 0) == 5 && cml_tensor_size(y, 0) == 5);
    const int64_t *lab = cml_tensor_data(y);
    CHECK(lab[0] == 0 && lab[1] == 9 && lab[2] == 4 && lab[3] == 7 && lab[4] == 1);
    const uint8_t *px = cml_tensor_data(x);
    int bad = 0;
    for (int i = 0; i < 5; i++) {
        int rec = i < 3 ? i : i - 3;
        for (int p = 0; p < 3072; p++) bad += px[i * 3072 + p] != (uint8_t)((rec * 7 + p) & 255);
    }
    CHECK_MSG(bad == 0, "%d pixels differ", bad);
    /* channel planes: (3, 32, 32) in record order, red plane first */
    int64_t idx[4] = {1, 2, 3, 4};
    CHECK(cml_tensor_item_at(x, idx) == (double)((7 + 2048 + 3 * 32 + 4) & 255));
    cml_tensor_release_all((cml_tensor *[]){x, y}, 2);
}

static void test_bad_files(void) {
    char path[512], good[512];
    cml_tensor *x = (cml_tensor *)1, *y = (cml_tensor *)1;
    uint8_t labels[3] = {1, 2, 3};

    write_records(tmp_path("truncated.bin", path, sizeof path), labels, 2, 100);
    const char *p = path;
    CHECK_STATUS(cml_cifar10_load(&p, 1, &x, &y), CML_ERR_CORRUPT, "has 6246 bytes, not a multiple of the 3073-byte record");
    CHECK(x == NULL && y == NULL);

    FILE *f = fopen(tmp_path("short.bin", path, sizeof path), "wb");
    if (f) {
        fwrite(labels, 1, 3, f);
        fclose(f);
    }
    CHECK_STATUS(cml_cifar10_load(&p, 1, &x, &y), CML_ERR_CORRUPT, "has 3 bytes");

    f = fopen(tmp_path("empty.bin", path, sizeof path), "wb");
    if (f) fclose(f);
    CHECK_STATUS(cml_cifar10_load(&p, 1, &x, &y), CML_ERR_CORRUPT, "empty.bin\" is empty");

    uint8_t bad_label[3] = {1, 10, 3};
    write_records(tmp_path("label.bin", path, sizeof path), bad_label, 3, 0);
    CHECK_STATUS(cml_cifar10_load(&p, 1, &x, &y), CML_ERR_CORRUPT, "record 1 (byte offset 3073) has label 10, must be in 0..9");
    CHECK(x == NULL && y == NULL);

    /* a good file followed by a bad one fails as a whole */
    write_records(tmp_path("good.bin", good, sizeof good), labels, 3, 0);
    const char *two[2] = {good, path};
    CHECK_STATUS(cml_cifar10_load(two, 2, &x, &y), CML_ERR_CORRUPT, "has label 10");
    CHECK(x == NULL && y == NULL);

    p = tmp_path("does_not_exist.bin", path, sizeof path);
    CHECK_STATUS(cml_cifar10_load(&p, 1, &x, &y), CML_ERR_IO, "cannot open");
    CHECK_ERROR(CML_ERR_IO, "No such file");

    p = CML_TEST_TMP; /* a directory */
    CHECK_STATUS(cml_cifar10_load(&p, 1, &x, &y), CML_ERR_IO, "Is a directory");

    CHECK_STATUS(cml_cifar10_load(NULL, 1, &x, &y), CML_ERR_INVALID_ARG, "n_paths=1 must be >= 1 (and paths not NULL)");
    CHECK_STATUS(cml_cifar10_load(&p, 0, &x, &y), CML_ERR_INVALID_ARG, "n_paths=0");
    CHECK_STATUS(cml_cifar10_load(&p, 1, NULL, &y), CML_ERR_INVALID_ARG, "images and labels must not be NULL");
    const char *null_path[1] = {NULL};
    CHECK_STATUS(cml_cifar10_load(null_path, 1, &x, &y), CML_ERR_INVALID_ARG, "paths[0] is NULL");
}

int main(void) {
    RUN(test_real_files);
    RUN(test_written_files);
    RUN(test_bad_files);
    return th_finish();
}
