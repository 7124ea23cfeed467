/* camel train cnn: convolutional networks on images: LeNet-5 on MNIST-format
 * data, or a small Conv-BN-ReLU-Pool network on CIFAR-10, with a progress
 * bar, per-epoch test accuracy and an optional JSON-lines log (the same
 * records as train mlp). */
#define _POSIX_C_SOURCE 200809L
#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "camel/camel.h"
#include "classifier.h"
#include "cli.h"

typedef struct cnn_args {
    const char *dataset, *data;
    int64_t limit, width;
    bool channels_last;
} cnn_args;

#define MNIST_HINT                                                                                        \
    "pass --data DIR with train-images-idx3-ubyte[.gz] and the other three IDX files, e.g. "             \
    "--data ../shared/data/mnist, or --data /usr/share/datasets/fashion-mnist (apt-get install "         \
    "dataset-fashion-mnist)"
#define CIFAR_HINT                                                                                        \
    "pass --data DIR with the CIFAR-10 binary files data_batch_1.bin .. data_batch_5.bin and "           \
    "test_batch.bin (from cifar-10-binary.tar.gz, https://www.cs.toronto.edu/~kriz/cifar.html), e.g. " \
    "--data ../shared/data/cifar10"

/* ---- data ----------------------------------------------------------------------------------------- */

typedef struct dataset {
    cml_tensor *x_train, *y_train, *x_test, *y_test; /* f32 images in the model's layout, i64 labels */
    int channels, size;
} dataset;

static void dataset_free(dataset *d) {
    cml_tensor_release_all((cml_tensor *[]){d->x_train, d->y_train, d->x_test, d->y_test}, 4);
    memset(d, 0, sizeof *d);
}

/* u8 (N, C, H, W) -> f32 ((x / 255 - mean[c]) / std[c]) in NCHW or NHWC. */
static cml_tensor *normalize(const cml_tensor *u8, const double *mean, const double *std, bool cl) {
    const int64_t *s = cml_tensor_shape(u8);
    int64_t N = s[0], C = s[1], HW = s[2] * s[3];
    int64_t shape[4] = {N, cl ? s[2] : C, cl ? s[3] : s[2], cl ? C : s[3]};
    cml_tensor *out = cml_tensor_empty(4, shape, CML_F32, CML_DEVICE_CPU);
    if (!out) return NULL;
    const uint8_t *px = cml_tensor_data(u8);
    float *y = cml_tensor_data(out);
    for (int64_t c = 0; c < C; c++) {
        float lut[256];
        for (int v = 0; v < 256; v++) lut[v] = (float)((v / 255.0 - mean[c]) / std[c]);
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++) {
                uint8_t v = px[(n * C + c) * HW + i];
                y[cl ? (n * HW + i) * C + c : (n * C + c) * HW + i] = lut[v];
            }
    }
    return out;
}

/* Per-channel mean and standard deviation of u8 (N, C, H, W) pixels scaled to [0, 1]. */
static void channel_stats(const cml_tensor *u8, double *mean, double *std) {
    const int64_t *s = cml_tensor_shape(u8);
    int64_t N = s[0], C = s[1], HW = s[2] * s[3];
    const uint8_t *px = cml_tensor_data(u8);
    for (int64_t c = 0; c < C; c++) {
        double sum = 0, sq = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++) {
                double v = px[(n * C + c) * HW + i] / 255.0;
                sum += v;
                sq += v * v;
            }
        double cnt = (double)(N * HW);
        mean[c] = sum / cnt;
        std[c] = sqrt(sq / cnt - mean[c] * mean[c]);
        if (!(std[c] > 0)) std[c] = 1;
    }
}

/* The files matching DIR/pattern, sorted (globfree frees them). */
static int find_files(const char *dir, const char *pattern, glob_t *g) {
    char pat[4096];
    snprintf(pat, sizeof pat, "%s/%s", dir, pattern);
    memset(g, 0, sizeof *g);
    int rc = glob(pat, 0, NULL, g);
    return rc == 0 ? (int)g->gl_pathc : 0;
}

static int load_cifar(const cnn_args *a, cml_tensor **tr_x, cml_tensor **tr_y, cml_tensor **te_x, cml_tensor **te_y) {
    glob_t train, test;
    int n_train = find_files(a->data, "data_batch_*.bin", &train), n_test = find_files(a->data, "test_batch*.bin", &test);
    int rc = 0;
    if (n_train == 0 || n_test == 0) {
        fprintf(stderr, "camel: no CIFAR-10 %s files in \"%s\" (looked for %s)\nhint: %s\n",
                n_train == 0 ? "training" : "test", a->data, n_train == 0 ? "data_batch_*.bin" : "test_batch*.bin",
                CIFAR_HINT);
        rc = 1;
    } else if (cml_cifar10_load((const char *const *)train.gl_pathv, n_train, tr_x, tr_y) != CML_OK) {
        rc = cli_fail("loading the CIFAR-10 training files", CIFAR_HINT);
    } else if (cml_cifar10_load((const char *const *)test.gl_pathv, n_test, te_x, te_y) != CML_OK) {
        rc = cli_fail("loading the CIFAR-10 test files", CIFAR_HINT);
    } else {
        printf("data: %s: %d training file%s (", a->data, n_train, n_train == 1 ? "" : "s");
        for (int i = 0; i < n_train; i++) printf("%s%s", i ? " " : "", strrchr(train.gl_pathv[i], '/') + 1);
        printf("), %d test file%s (", n_test, n_test == 1 ? "" : "s");
        for (int i = 0; i < n_test; i++) printf("%s%s", i ? " " : "", strrchr(test.gl_pathv[i], '/') + 1);
        printf(")\n");
    }
    globfree(&train);
    globfree(&test);
    return rc;
}

static int load_data(const cnn_args *a, dataset *d) {
    bool mnist = strcmp(a->dataset, "mnist") == 0;
    cml_tensor *tr_u8 = NULL, *te_u8 = NULL;
    int rc = 0;
    if (mnist) {
        if (cml_mnist_load(a->data, true, &tr_u8, &d->y_train) != CML_OK)
            return cli_fail("loading the training data", MNIST_HINT);
        if (cml_mnist_load(a->data, false, &te_u8, &d->y_test) != CML_OK) {
            cml_tensor_release(tr_u8);
            dataset_free(d);
            return cli_fail("loading the test data", MNIST_HINT);
        }
        /* (N, 28, 28) -> (N, 1, 28, 28) */
        cml_tensor *u[2] = {tr_u8, te_u8};
        for (int i = 0; i < 2; i++) {
            int64_t s[4] = {cml_tensor_size(u[i], 0), 1, 28, 28};
            cml_tensor *r = cml_reshape(u[i], 4, s);
            cml_tensor_release(u[i]);
            u[i] = r;
        }
        tr_u8 = u[0];
        te_u8 = u[1];
        d->channels = 1;
        d->size = 28;
    } else {
        rc = load_cifar(a, &tr_u8, &d->y_train, &te_u8, &d->y_test);
        d->channels = 3;
        d->size = 32;
    }
    if (rc == 0 && (!tr_u8 || !te_u8)) rc = cli_fail("preparing the data", NULL);
    if (rc == 0 && a->limit > 0 && a->limit < cml_tensor_size(tr_u8, 0)) {
        cml_tensor *xs = cml_slice(tr_u8, 0, 0, a->limit, 1), *ys = cml_slice(d->y_train, 0, 0, a->limit, 1);
        cml_tensor *xc = cml_contiguous(xs), *yc = cml_contiguous(ys);
        cml_tensor_release_all((cml_tensor *[]){xs, ys, tr_u8, d->y_train}, 4);
        tr_u8 = xc;
        d->y_train = yc;
        if (!xc || !yc) rc = cli_fail("--limit", NULL);
    }
    if (rc == 0) {
        double mean[3], std[3];
        channel_stats(tr_u8, mean, std);
        d->x_train = normalize(tr_u8, mean, std, a->channels_last);
        d->x_test = normalize(te_u8, mean, std, a->channels_last);
        if (!d->x_train || !d->x_test) rc = cli_fail("normalizing the images", NULL);
        if (rc == 0) {
            printf("data: %s: %lld training and %lld test images of %dx%dx%d (pixel mean", a->data,
                   (long long)cml_tensor_size(d->x_train, 0), (long long)cml_tensor_size(d->x_test, 0), d->channels,
                   d->size, d->size);
            for (int c = 0; c < d->channels; c++) printf(" %.4f", mean[c]);
            printf(", std");
            for (int c = 0; c < d->channels; c++) printf(" %.4f", std[c]);
            printf(")\n");
        }
    }
    cml_tensor_release_all((cml_tensor *[]){tr_u8, te_u8}, 2);
    if (rc) dataset_free(d);
    return rc;
}

/* ---- models ------------------------------------------------------------------------------------------ */

/* LeNet-5: conv 6@5x5 pad 2, ReLU, maxpool 2, conv 16@5x5, ReLU, maxpool 2, 400-120-84-10. */
static cml_module *lenet5(bool cl, cml_rng *rng) {
    cml_conv2d_params p1 = {.pad_h = 2, .pad_w = 2, .channels_last = cl}, p2 = {.channels_last = cl};
    cml_module *m[] = {cml_conv2d_create(1, 6, 5, 5, p1, true, rng), cml_relu_create(), cml_maxpool2d_create(2, 0, 0, cl),
                       cml_conv2d_create(6, 16, 5, 5, p2, true, rng), cml_relu_create(), cml_maxpool2d_create(2, 0, 0, cl),
                       cml_flatten_create(), cml_linear_create(400, 120, true, rng), cml_relu_create(),
                       cml_linear_create(120, 84, true, rng), cml_relu_create(), cml_linear_create(84, 10, true, rng)};
    int n = (int)(sizeof m / sizeof m[0]);
    for (int i = 0; i < n; i++)
        if (!m[i]) {
            for (int j = 0; j < n; j++) cml_module_destroy(m[j]);
            return NULL;
        }
    return cml_sequential_create(m, n);
}

/* Three stages of conv 3x3 (no bias) - BatchNorm - ReLU - maxpool 2 with w, 2w, 4w channels,
 * then global average pooling and a linear classifier. */
static cml_module *cifar_cnn(int64_t w, bool cl, cml_rng *rng) {
    enum { STAGES = 3, PER_STAGE = 4 };
    cml_module *m[STAGES * PER_STAGE + 2] = {0};
    int n = 0;
    int64_t in = 3;
    cml_conv2d_params p = {.pad_h = 1, .pad_w = 1, .channels_last = cl};
    for (int s = 0; s < STAGES; s++) {
        int64_t out = w << s;
        m[n++] = cml_conv2d_create(in, out, 3, 3, p, false, rng);
        m[n++] = cml_batchnorm2d_create(out, 0.1f, 1e-5f, cl);
        m[n++] = cml_relu_create();
        m[n++] = cml_maxpool2d_create(2, 0, 0, cl);
        in = out;
    }
    m[n++] = cml_global_avgpool_create(cl);
    m[n++] = cml_linear_create(in, 10, true, rng);
    for (int i = 0; i < n; i++)
        if (!m[i]) {
            for (int j = 0; j < n; j++) cml_module_destroy(m[j]);
            return NULL;
        }
    return cml_sequential_create(m, n);
}

/* ---- command ------------------------------------------------------------------------------------------ */

static int run(const cnn_args *a, const classifier_opts *o) {
    double t0 = cli_now();
    bool mnist = strcmp(a->dataset, "mnist") == 0;
    if (!mnist && strcmp(a->dataset, "cifar10") != 0) {
        fprintf(stderr, "camel: --dataset must be mnist or cifar10 (got \"%s\")\n", a->dataset);
        return 2;
    }
    if (!a->data) {
        fprintf(stderr, "camel: --data DIR is required\nhint: %s\n", mnist ? MNIST_HINT : CIFAR_HINT);
        return 2;
    }
    if (a->limit < 0 || a->width < 1 || a->width > 4096) {
        fprintf(stderr, "camel: need --limit >= 0 and 1 <= --width <= 4096\n");
        return 2;
    }
    int status = classifier_check(o);
    if (status) return status;

    dataset d = {0};
    status = load_data(a, &d);
    if (status) return status;
    cml_rng rng;
    cml_rng_init(&rng, (uint64_t)o->seed);
    cml_module *model = mnist ? lenet5(a->channels_last, &rng) : cifar_cnn(a->width, a->channels_last, &rng);
    char name[160];
    if (mnist)
        snprintf(name, sizeof name, "LeNet-5 (%s)", a->channels_last ? "NHWC" : "NCHW");
    else
        snprintf(name, sizeof name, "CNN 3 x [conv 3x3, BatchNorm, ReLU, maxpool 2] %lld-%lld-%lld channels, global "
                 "average pool, linear (%s)", (long long)a->width, (long long)a->width * 2, (long long)a->width * 4,
                 a->channels_last ? "NHWC" : "NCHW");
    if (!model) status = cli_fail("building the model", NULL);
    else status = classifier_train(model, name, &(classifier_data){d.x_train, d.y_train, d.x_test, d.y_test, a->data, t0}, o);
    cml_module_destroy(model);
    dataset_free(&d);
    return status;
}

int cmd_train_cnn(int argc, char **argv) {
    cnn_args a = {.dataset = "mnist", .width = 32};
    classifier_opts o = {.optim = "adam", .schedule = "cosine", .device = "cpu", .epochs = 3, .batch = 64, .lr = 1e-3};
    cli_flag flags[] = {
        {"dataset", CLI_STRING, &a.dataset, "mnist (LeNet-5; also Fashion-MNIST) or cifar10 (Conv-BN-ReLU-Pool CNN)"},
        {"data", CLI_STRING, &a.data,
         "directory with the data set: the four MNIST-format IDX files, or CIFAR-10's data_batch_*.bin and "
         "test_batch*.bin (required)"},
        {"limit", CLI_INT, &a.limit, "use only the first N training images (0 = all)"},
        {"width", CLI_INT, &a.width, "cifar10: channels of the first stage (then 2x and 4x)"},
        {"channels-last", CLI_BOOL, &a.channels_last, "run the network in NHWC instead of NCHW"},
        CLASSIFIER_FLAGS(o),
    };
    int rc = cli_parse(argc, argv, flags, (int)(sizeof flags / sizeof flags[0]),
                       "camel train cnn --dataset mnist|cifar10 --data DIR [options]",
                       "Trains a convolutional network with softmax cross-entropy and reports the test accuracy after "
                       "every epoch: LeNet-5 on MNIST-format data (MNIST, Fashion-MNIST), or a three-stage "
                       "Conv-BatchNorm-ReLU-MaxPool network with global average pooling on CIFAR-10.");
    if (rc) return rc == 1 ? 0 : rc;
    return run(&a, &o);
}
