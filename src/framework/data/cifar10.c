/* CIFAR-10, binary version: records of 1 label byte + 3072 pixel bytes
 * (1024 red, 1024 green, 1024 blue; 32x32 row-major), files concatenated.
 * Every file is sized first, so a truncated or padded file is reported before
 * anything is allocated; labels are checked to be in 0..9. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/data.h"
#include "runtime/error.h"

#define RECORD 3073
#define PIXELS 3072
#define CHUNK_RECORDS 1024

#define CIFAR_HINT                                                                                  \
    "CIFAR-10 binary files are data_batch_1.bin .. data_batch_5.bin and test_batch.bin from "       \
    "cifar-10-binary.tar.gz (https://www.cs.toronto.edu/~kriz/cifar.html), extracted"

/* The size of the file in bytes (CML_ERR_IO when it cannot be opened or sized). */
static cml_status file_size(const char *path, int64_t *size) {
    errno = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return cml__error(CML_ERR_IO, "cml_cifar10_load: cannot open \"%s\": %s (%s)", path, strerror(errno),
                          CIFAR_HINT);
    errno = 0;
    if (fgetc(fp) == EOF && ferror(fp)) { /* a directory opens but cannot be read */
        int e = errno;
        fclose(fp);
        return cml__error(CML_ERR_IO, "cml_cifar10_load: cannot read \"%s\": %s", path, strerror(e));
    }
    long n = -1;
    if (fseek(fp, 0, SEEK_END) == 0) n = ftell(fp);
    fclose(fp);
    if (n < 0) return cml__error(CML_ERR_IO, "cml_cifar10_load: cannot determine the size of \"%s\"", path);
    *size = n;
    return CML_OK;
}

/* Reads `records` records of path into images/labels starting at record `first`. */
static cml_status read_file(const char *path, int64_t records, int64_t first, uint8_t *images, int64_t *labels,
                            uint8_t *buf) {
    errno = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return cml__error(CML_ERR_IO, "cml_cifar10_load: cannot open \"%s\": %s", path, strerror(errno));
    cml_status s = CML_OK;
    for (int64_t r0 = 0; r0 < records && s == CML_OK; r0 += CHUNK_RECORDS) {
        int64_t n = records - r0 < CHUNK_RECORDS ? records - r0 : CHUNK_RECORDS;
        size_t want = (size_t)n * RECORD, got = fread(buf, 1, want, fp);
        if (got != want) {
            s = ferror(fp) ? cml__error(CML_ERR_IO, "cml_cifar10_load: cannot read \"%s\": %s", path, strerror(errno))
                           : cml__error(CML_ERR_CORRUPT,
                                        "cml_cifar10_load: \"%s\" ended after %lld of %lld bytes (it changed while "
                                        "being read?)",
                                        path, (long long)((size_t)r0 * RECORD + got), (long long)(records * RECORD));
            break;
        }
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *rec = buf + i * RECORD;
            if (rec[0] > 9) {
                s = cml__error(CML_ERR_CORRUPT,
                               "cml_cifar10_load: \"%s\": record %lld (byte offset %lld) has label %u, must be in "
                               "0..9 (is this a CIFAR-10 binary file? CIFAR-100 records are 3074 bytes)",
                               path, (long long)(r0 + i), (long long)((r0 + i) * RECORD), (unsigned)rec[0]);
                break;
            }
            labels[first + r0 + i] = rec[0];
            memcpy(images + (first + r0 + i) * PIXELS, rec + 1, PIXELS);
        }
    }
    fclose(fp);
    return s;
}

cml_status cml_cifar10_load(const char *const *paths, int n_paths, cml_tensor **images, cml_tensor **labels) {
    CML_CHECK_ARG(images != NULL && labels != NULL, "cml_cifar10_load: images and labels must not be NULL");
    *images = NULL;
    *labels = NULL;
    CML_CHECK_ARG(paths != NULL && n_paths >= 1, "cml_cifar10_load: n_paths=%d must be >= 1 (and paths not NULL)",
                  n_paths);
    int64_t total = 0;
    for (int i = 0; i < n_paths; i++) {
        CML_CHECK_ARG(paths[i] != NULL, "cml_cifar10_load: paths[%d] is NULL", i);
        int64_t size = 0;
        CML_TRY(file_size(paths[i], &size));
        if (size == 0) return cml__error(CML_ERR_CORRUPT, "cml_cifar10_load: \"%s\" is empty", paths[i]);
        if (size % RECORD != 0)
            return cml__error(CML_ERR_CORRUPT,
                              "cml_cifar10_load: \"%s\" has %lld bytes, not a multiple of the 3073-byte record "
                              "(1 label + 3072 pixels): truncated or not a CIFAR-10 binary file",
                              paths[i], (long long)size);
        total += size / RECORD;
    }
    int64_t ishape[4] = {total, 3, 32, 32};
    cml_tensor *img = cml_tensor_empty(4, ishape, CML_U8, CML_DEVICE_CPU);
    cml_tensor *lbl = img ? cml_tensor_empty(1, &total, CML_I64, CML_DEVICE_CPU) : NULL;
    uint8_t *buf = lbl ? malloc((size_t)CHUNK_RECORDS * RECORD) : NULL;
    cml_status s = CML_OK;
    if (!buf) {
        s = cml_last_status() != CML_OK ? cml_last_status()
                                        : cml__error(CML_ERR_OOM, "cml_cifar10_load: out of memory");
    }
    int64_t first = 0;
    for (int i = 0; i < n_paths && s == CML_OK; i++) {
        int64_t size = 0;
        s = file_size(paths[i], &size);
        if (s == CML_OK && size % RECORD != 0)
            s = cml__error(CML_ERR_CORRUPT, "cml_cifar10_load: \"%s\" changed size while being read", paths[i]);
        int64_t records = size / RECORD;
        if (s == CML_OK && first + records > total)
            s = cml__error(CML_ERR_CORRUPT, "cml_cifar10_load: \"%s\" grew while being read", paths[i]);
        if (s == CML_OK) s = read_file(paths[i], records, first, cml_tensor_data(img), cml_tensor_data(lbl), buf);
        first += records;
    }
    if (s == CML_OK && first != total)
        s = cml__error(CML_ERR_CORRUPT, "cml_cifar10_load: the files shrank while being read");
    free(buf);
    if (s != CML_OK) {
        cml_tensor_release(img);
        cml_tensor_release(lbl);
        return s;
    }
    *images = img;
    *labels = lbl;
    return CML_OK;
}
