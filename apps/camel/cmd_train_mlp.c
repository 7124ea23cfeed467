/* camel train mlp: a multilayer perceptron on MNIST-format data (MNIST,
 * Fashion-MNIST). The training loop is classifier.c's. */
#include <math.h>
#include <stdlib.h>

#include "camel/camel.h"
#include "classifier.h"
#include "cli.h"

/* Parses "512,256" into sizes[0..]; returns the number of layers or -1. */
static int parse_hidden(const char *text, int64_t *sizes, int cap) {
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end = NULL;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 1 || n >= cap || (*end && *end != ',')) return -1;
        sizes[n++] = v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* Mean and standard deviation of all pixels (u8, scaled to [0, 1]) of the training images. */
static void pixel_stats(const cml_tensor *images, float *mean, float *std) {
    const uint8_t *px = cml_tensor_data(images);
    int64_t n = cml_tensor_numel(images);
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = px[i] / 255.0;
        s += v;
        ss += v * v;
    }
    double m = s / (double)n;
    *mean = (float)m;
    *std = (float)sqrt(ss / (double)n - m * m);
}

static int run(const char *data, const char *hidden, double dropout, const classifier_opts *o) {
    double t0 = cli_now();
    int rc = classifier_check(o);
    if (rc) return rc;
    int64_t sizes[16] = {784};
    int n_hidden = parse_hidden(hidden, sizes + 1, 14);
    if (n_hidden < 0 || !(dropout >= 0 && dropout < 1)) {
        fprintf(stderr, "camel: --hidden must be a comma-separated list of layer widths (e.g. 256 or 512,256) "
                        "and 0 <= --dropout < 1\n");
        return 2;
    }
    sizes[n_hidden + 1] = 10;

    const char *hint = "pass --data DIR with train-images-idx3-ubyte[.gz] etc.; for Fashion-MNIST: "
                       "apt-get install dataset-fashion-mnist (files in /usr/share/datasets/fashion-mnist)";
    cml_tensor *train_u8 = NULL, *train_y = NULL, *test_u8 = NULL, *test_y = NULL;
    if (cml_mnist_load(data, true, &train_u8, &train_y) != CML_OK) return cli_fail("loading training data", hint);
    if (cml_mnist_load(data, false, &test_u8, &test_y) != CML_OK) {
        cml_tensor_release_all((cml_tensor *[]){train_u8, train_y}, 2);
        return cli_fail("loading test data", hint);
    }
    float mean, std;
    pixel_stats(train_u8, &mean, &std);
    cml_tensor *x_train = cml_normalize_u8(train_u8, mean, std, true);
    cml_tensor *x_test = cml_normalize_u8(test_u8, mean, std, true);
    printf("data: %s: %lld training and %lld test images (pixel mean %.4f, std %.4f)\n", data,
           (long long)cml_tensor_size(train_u8, 0), (long long)cml_tensor_size(test_u8, 0), (double)mean,
           (double)std);
    cml_tensor_release_all((cml_tensor *[]){train_u8, test_u8}, 2);

    cml_rng rng;
    cml_rng_init(&rng, (uint64_t)o->seed);
    cml_module *model = cml_mlp_create(sizes, n_hidden + 2, CML_ACT_RELU, (float)dropout, &rng);
    char name[128] = "MLP";
    for (int i = 0, used = 3; i < n_hidden + 2 && used < (int)sizeof name; i++)
        used += snprintf(name + used, sizeof name - (size_t)used, "%s%lld", i ? "-" : " ", (long long)sizes[i]);
    if (!model || !x_train || !x_test) rc = cli_fail("setting up training", NULL);
    else rc = classifier_train(model, name, &(classifier_data){x_train, train_y, x_test, test_y, data, t0}, o);
    cml_module_destroy(model);
    cml_tensor_release_all((cml_tensor *[]){x_train, x_test, train_y, test_y}, 4);
    return rc;
}

int cmd_train_mlp(int argc, char **argv) {
    const char *data = "/usr/share/datasets/fashion-mnist", *hidden = "512";
    double dropout = 0;
    classifier_opts o = {.optim = "adam", .schedule = "cosine", .device = "cpu", .epochs = 8, .batch = 128, .lr = 1e-3};
    cli_flag flags[] = {
        {"data", CLI_STRING, &data, "directory with the four MNIST-format IDX files (.gz or raw)"},
        {"hidden", CLI_STRING, &hidden, "hidden layer widths, comma-separated"},
        {"dropout", CLI_FLOAT, &dropout, "dropout after each hidden layer"},
        CLASSIFIER_FLAGS(o),
    };
    int rc = cli_parse(argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), "camel train mlp [options]",
                       "Trains a multilayer perceptron (ReLU) with softmax cross-entropy on MNIST-format data and "
                       "reports the test accuracy after every epoch.");
    if (rc) return rc == 1 ? 0 : rc;
    return run(data, hidden, dropout, &o);
}
