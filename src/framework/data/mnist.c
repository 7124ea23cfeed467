/* MNIST-format data sets (MNIST, Fashion-MNIST) and u8 image normalisation. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/data.h"
#include "runtime/error.h"

#define MNIST_HINT                                                                              \
    "pass the directory that holds them with --data DIR (for Fashion-MNIST: `apt-get install " \
    "dataset-fashion-mnist` puts the files in /usr/share/datasets/fashion-mnist)"

/* "<dir>/<name>" or "<dir>/<name>.gz", whichever exists (a file that exists but
 * cannot be opened counts as found, so that cml_idx_load reports why).
 * Returns a malloc'd path or NULL (*oom tells an allocation failure apart). */
static char *find_file(const char *dir, const char *name, bool *oom) {
    size_t n = strlen(dir) + strlen(name) + 8;
    char *path = malloc(n);
    if (!path) {
        *oom = true;
        return NULL;
    }
    static const char *const suffixes[2] = {"", ".gz"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, n, "%s/%s%s", dir, name, suffixes[i]);
        errno = 0;
        FILE *fp = fopen(path, "rb");
        if (fp) {
            fclose(fp);
            return path;
        }
        if (errno != ENOENT && errno != ENOTDIR) return path;
    }
    free(path);
    return NULL;
}

static cml_status check_images(const char *path, const cml_tensor *images) {
    const int64_t *s = cml_tensor_shape(images);
    if (cml_tensor_dtype(images) != CML_U8 || cml_tensor_ndim(images) != 3 || s[1] != 28 || s[2] != 28) {
        char buf[96];
        return cml__error(CML_ERR_CORRUPT, "cml_mnist_load: \"%s\": images must be u8 (N, 28, 28), found %s",
                          path, cml_tensor_describe(images, buf, sizeof buf));
    }
    return CML_OK;
}

/* u8 (N) labels in [0, 9] -> a new i64 (N) tensor. */
static cml_status convert_labels(const char *path, const cml_tensor *raw, int64_t n, cml_tensor **out) {
    if (cml_tensor_dtype(raw) != CML_U8 || cml_tensor_ndim(raw) != 1) {
        char buf[96];
        return cml__error(CML_ERR_CORRUPT, "cml_mnist_load: \"%s\": labels must be u8 (N), found %s", path,
                          cml_tensor_describe(raw, buf, sizeof buf));
    }
    int64_t count = cml_tensor_size(raw, 0);
    if (count != n)
        return cml__error(CML_ERR_CORRUPT,
                          "cml_mnist_load: \"%s\": %lld labels for %lld images (the counts must match)",
                          path, (long long)count, (long long)n);
    const uint8_t *src = cml_tensor_data(raw);
    for (int64_t i = 0; i < n; i++)
        if (src[i] > 9)
            return cml__error(CML_ERR_CORRUPT,
                              "cml_mnist_load: \"%s\": label %lld has value %u, must be in [0, 9]", path,
                              (long long)i, (unsigned)src[i]);
    cml_tensor *t = cml_tensor_empty(1, &n, CML_I64, CML_DEVICE_CPU);
    if (!t) return cml_last_status() != CML_OK ? cml_last_status() : CML_ERR_OOM;
    int64_t *dst = cml_tensor_data(t);
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
    *out = t;
    return CML_OK;
}

static cml_status mnist_load(const char *img_path, const char *lbl_path,
                             cml_tensor **images, cml_tensor **labels) {
    cml_tensor *img = NULL, *raw = NULL, *lbl = NULL;
    cml_status s = cml_idx_load(img_path, &img);
    if (s == CML_OK) s = check_images(img_path, img);
    if (s == CML_OK) s = cml_idx_load(lbl_path, &raw);
    if (s == CML_OK) s = convert_labels(lbl_path, raw, cml_tensor_size(img, 0), &lbl);
    cml_tensor_release(raw);
    if (s != CML_OK) {
        cml_tensor_release(img);
        cml_tensor_release(lbl);
        return s;
    }
    *images = img;
    *labels = lbl;
    return CML_OK;
}

cml_status cml_mnist_load(const char *dir, bool train, cml_tensor **images, cml_tensor **labels) {
    CML_CHECK_ARG(images != NULL && labels != NULL, "cml_mnist_load: images and labels must not be NULL");
    *images = NULL;
    *labels = NULL;
    CML_CHECK_ARG(dir != NULL, "cml_mnist_load: dir must not be NULL");
    const char *prefix = train ? "train" : "t10k";
    char img_name[32], lbl_name[32];
    snprintf(img_name, sizeof img_name, "%s-images-idx3-ubyte", prefix);
    snprintf(lbl_name, sizeof lbl_name, "%s-labels-idx1-ubyte", prefix);

    bool oom = false;
    char *img_path = find_file(dir, img_name, &oom);
    char *lbl_path = find_file(dir, lbl_name, &oom);
    cml_status s = CML_OK;
    if (oom) {
        s = cml__error(CML_ERR_OOM, "cml_mnist_load: out of memory");
    } else if (!img_path || !lbl_path) {
        char missing[96];
        if (!img_path && !lbl_path)
            snprintf(missing, sizeof missing, "%s[.gz] and %s[.gz]", img_name, lbl_name);
        else
            snprintf(missing, sizeof missing, "%s[.gz]", img_path ? lbl_name : img_name);
        s = cml__error(CML_ERR_IO, "cml_mnist_load: MNIST-format files not found in \"%s\": looked for %s; %s",
                       dir, missing, MNIST_HINT);
    } else {
        s = mnist_load(img_path, lbl_path, images, labels);
    }
    free(img_path);
    free(lbl_path);
    return s;
}

cml_tensor *cml_normalize_u8(const cml_tensor *images, float mean, float std, bool flatten) {
    if (!images) return NULL;
    if (cml_tensor_dtype(images) != CML_U8) {
        char buf[96];
        cml__error(CML_ERR_DTYPE, "cml_normalize_u8: images must be u8, got %s",
                   cml_tensor_describe(images, buf, sizeof buf));
        return NULL;
    }
    if (cml_tensor_device(images).type != CML_CPU) {
        cml__error(CML_ERR_UNSUPPORTED, "cml_normalize_u8: images must be on the CPU, got %s",
                   cml_device_name(cml_tensor_device(images)));
        return NULL;
    }
    if (std == 0.0f || !isfinite(std) || !isfinite(mean)) {
        cml__error(CML_ERR_INVALID_ARG, "cml_normalize_u8: std=%g must be nonzero and mean=%g finite",
                   (double)std, (double)mean);
        return NULL;
    }
    int ndim = cml_tensor_ndim(images);
    if (flatten && ndim < 1) {
        cml__error(CML_ERR_SHAPE, "cml_normalize_u8: flatten needs at least 1 dim, got a 0-d tensor");
        return NULL;
    }
    cml_tensor *src = cml_contiguous(images);
    if (!src) return NULL;
    int64_t n = cml_tensor_numel(src);
    int64_t flat[2];
    cml_tensor *out;
    if (flatten) {
        flat[0] = cml_tensor_size(src, 0);
        flat[1] = 1;
        for (int i = 1; i < ndim; i++) flat[1] *= cml_tensor_size(src, i);
        out = cml_tensor_empty(2, flat, CML_F32, CML_DEVICE_CPU);
    } else {
        out = cml_tensor_empty(ndim, cml_tensor_shape(src), CML_F32, CML_DEVICE_CPU);
    }
    if (out) {
        float lut[256];
        for (int v = 0; v < 256; v++) lut[v] = ((float)v / 255.0f - mean) / std;
        const uint8_t *x = cml_tensor_data(src);
        float *y = cml_tensor_data(out);
        for (int64_t i = 0; i < n; i++) y[i] = lut[x[i]];
    }
    cml_tensor_release(src);
    return out;
}
