/* camel train mlp: a multilayer perceptron on MNIST-format data (MNIST,
 * Fashion-MNIST), with a progress bar, per-epoch test accuracy and an
 * optional JSON-lines log. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "camel/camel.h"
#include "cli.h"

typedef struct mlp_args {
    const char *data, *hidden, *optim, *schedule, *log, *device;
    int64_t epochs, batch, seed, warmup, threads;
    double lr, weight_decay, dropout, clip;
} mlp_args;

/* Parses "512,256" into sizes[1..]; returns the number of hidden layers or -1. */
static int parse_hidden(const char *text, int64_t *sizes, int cap) {
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end = NULL;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 1 || n >= cap) return -1;
        sizes[n++] = v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

/* Mean and standard deviation of all pixels (u8) of the training images. */
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

typedef struct eval_result {
    double loss, accuracy;
} eval_result;

/* Loss and accuracy over a whole split, in batches, without recording a graph. */
static cml_status evaluate(cml_module *model, const cml_tensor *x, const cml_tensor *y, eval_result *r) {
    bool prev = cml_set_grad_enabled(false);
    cml_module_train(model, false);
    int64_t n = cml_tensor_size(x, 0), correct = 0;
    double loss_sum = 0;
    cml_status s = CML_OK;
    for (int64_t start = 0; start < n && s == CML_OK; start += 1000) {
        int64_t stop = start + 1000 < n ? start + 1000 : n;
        cml_tensor *xb = cml_slice(x, 0, start, stop, 1), *yb = cml_slice(y, 0, start, stop, 1);
        cml_tensor *logits = cml_module_forward(model, xb);
        cml_tensor *loss = cml_cross_entropy(logits, yb, -100, CML_REDUCTION_SUM);
        cml_tensor *pred = cml_argmax(logits, 1, false);
        if (!loss || !pred) {
            s = cml_last_status();
        } else {
            loss_sum += cml_tensor_item(loss);
            const int64_t *p = cml_tensor_data(pred), *t = cml_tensor_data(yb);
            for (int64_t i = 0; i < stop - start; i++) correct += p[i] == t[i];
        }
        cml_tensor_release_all((cml_tensor *[]){xb, yb, logits, loss, pred}, 5);
    }
    cml_module_train(model, true);
    cml_set_grad_enabled(prev);
    r->loss = loss_sum / (double)n;
    r->accuracy = (double)correct / (double)n;
    return s;
}

/* One optimizer step on a batch; returns the batch loss or NAN with the error set. */
static double train_step(cml_module *model, cml_optim *opt, const cml_param *params, int n_params, double clip,
                         const cml_tensor *x, const cml_tensor *y, const cml_tensor *idx) {
    cml_tensor *xb = cml_index_select(x, 0, idx), *yb = cml_index_select(y, 0, idx);
    cml_tensor *logits = cml_module_forward(model, xb);
    cml_tensor *loss = cml_cross_entropy(logits, yb, -100, CML_REDUCTION_MEAN);
    double value = NAN;
    if (loss && cml_backward(loss, NULL) == CML_OK &&
        (clip <= 0 || cml_clip_grad_norm(params, n_params, clip, NULL) == CML_OK) && cml_optim_step(opt) == CML_OK) {
        value = cml_tensor_item(loss);
        cml_optim_zero_grad(opt);
    }
    cml_tensor_release_all((cml_tensor *[]){xb, yb, logits, loss}, 4);
    return value;
}

static cml_optim *make_optimizer(const mlp_args *a, const cml_param *params, int n) {
    if (strcmp(a->optim, "sgd") == 0)
        return cml_sgd_create(params, n, (cml_sgd_opts){(float)a->lr, 0.9f, true, (float)a->weight_decay});
    cml_adam_opts o = {(float)a->lr, 0.9f, 0.999f, 1e-8f, (float)a->weight_decay};
    if (strcmp(a->optim, "adam") == 0) return cml_adam_create(params, n, o);
    if (strcmp(a->optim, "adamw") == 0) return cml_adamw_create(params, n, o);
    fprintf(stderr, "camel: --optim must be adam, adamw or sgd (got \"%s\")\n", a->optim);
    return NULL;
}

static int run(const mlp_args *a) {
    double t0 = cli_now();
    if (a->threads > 0) cml_set_cpu_threads((int)a->threads);
    cml_device dev;
    if (cml_device_parse(a->device, &dev) != CML_OK) return cli_fail("--device", "use --device cpu or --device cuda");
    if (dev.type != CML_CPU && !cml_ctx_default(dev))
        return cli_fail("cannot use the GPU", "run with --device cpu (the default), or on a machine with an NVIDIA GPU");
    int64_t sizes[16] = {784};
    int n_hidden = parse_hidden(a->hidden, sizes + 1, 14);
    if (n_hidden < 0) {
        fprintf(stderr, "camel: --hidden must be a comma-separated list of layer widths, e.g. 256 or 512,256\n");
        return 2;
    }
    sizes[n_hidden + 1] = 10;
    if (a->epochs < 1 || a->batch < 1 || a->lr <= 0 || a->dropout < 0 || a->dropout >= 1) {
        fprintf(stderr, "camel: need --epochs >= 1, --batch >= 1, --lr > 0 and 0 <= --dropout < 1\n");
        return 2;
    }

    cml_tensor *train_u8 = NULL, *train_y = NULL, *test_u8 = NULL, *test_y = NULL;
    const char *data_hint = "pass --data DIR with train-images-idx3-ubyte[.gz] etc.; for Fashion-MNIST: "
                            "apt-get install dataset-fashion-mnist (files in /usr/share/datasets/fashion-mnist)";
    if (cml_mnist_load(a->data, true, &train_u8, &train_y) != CML_OK) return cli_fail("loading training data", data_hint);
    if (cml_mnist_load(a->data, false, &test_u8, &test_y) != CML_OK) {
        cml_tensor_release_all((cml_tensor *[]){train_u8, train_y}, 2);
        return cli_fail("loading test data", data_hint);
    }
    float mean, std;
    pixel_stats(train_u8, &mean, &std);
    cml_tensor *x_train = cml_normalize_u8(train_u8, mean, std, true);
    cml_tensor *x_test = cml_normalize_u8(test_u8, mean, std, true);
    cml_tensor_release_all((cml_tensor *[]){train_u8, test_u8}, 2);
    int64_t n_train = cml_tensor_size(x_train, 0);
    printf("data: %s: %lld training and %lld test images (pixel mean %.4f, std %.4f)\n", a->data,
           (long long)n_train, (long long)cml_tensor_size(x_test, 0), (double)mean, (double)std);

    cml_rng rng;
    cml_rng_init(&rng, (uint64_t)a->seed);
    cml_module *model = cml_mlp_create(sizes, n_hidden + 2, CML_ACT_RELU, (float)a->dropout, &rng);
    int n_params = model ? cml_module_parameters(model, NULL, 0) : 0;
    cml_param *params = calloc((size_t)(n_params > 0 ? n_params : 1), sizeof *params);
    if (model) cml_module_parameters(model, params, n_params);
    cml_optim *opt = model ? make_optimizer(a, params, n_params) : NULL;
    cml_batch_iter *it = cml_batch_iter_create(n_train, a->batch, true, false, (uint64_t)a->seed + 1);
    int status = 0;
    cli_json log;
    if (!model || !opt || !it || !x_train || !x_test) {
        status = cli_fail("setting up training", NULL);
        goto done;
    }
    if (!cli_json_open(&log, a->log)) {
        status = 1;
        goto done;
    }
    printf("model: MLP");
    for (int i = 0; i < n_hidden + 2; i++) printf("%s%lld", i ? "-" : " ", (long long)sizes[i]);
    printf(", %lld parameters, %s lr %g, batch %lld, %lld epochs, %d CPU threads\n",
           (long long)cml_module_num_elements(model), a->optim, a->lr, (long long)a->batch, (long long)a->epochs,
           cml_cpu_threads());

    int64_t steps_per_epoch = cml_batch_iter_batches(it), step = 0;
    cml_lr_schedule sched = {strcmp(a->schedule, "cosine") == 0 ? CML_LR_COSINE : CML_LR_CONSTANT, a->lr, a->warmup,
                             steps_per_epoch * a->epochs, 0.0, 0, 0};
    eval_result test = {NAN, 0};
    for (int64_t epoch = 1; epoch <= a->epochs && status == 0; epoch++) {
        double te = cli_now(), loss_sum = 0;
        int64_t seen = 0, batches = 0;
        char label[32];
        snprintf(label, sizeof label, "epoch %lld/%lld", (long long)epoch, (long long)a->epochs);
        cli_progress progress;
        cli_progress_start(&progress, label, n_train, "samples");
        const cml_tensor *idx;
        if (epoch > 1) cml_batch_iter_reset(it);
        while ((idx = cml_batch_iter_next(it)) != NULL) {
            cml_optim_set_lr(opt, (float)cml_lr_at(&sched, step++));
            double loss = train_step(model, opt, params, n_params, a->clip, x_train, train_y, idx);
            if (isnan(loss)) {
                status = cli_fail("training step", NULL);
                break;
            }
            loss_sum += loss;
            batches++;
            seen += cml_tensor_numel(idx);
            cli_progress_update(&progress, seen, "loss", loss_sum / (double)batches);
        }
        cli_progress_finish(&progress);
        if (status) break;
        double train_seconds = cli_now() - te;
        if (evaluate(model, x_test, test_y, &test) != CML_OK) {
            status = cli_fail("evaluation", NULL);
            break;
        }
        printf("epoch %lld/%lld  train loss %.4f  test loss %.4f  test accuracy %.2f%%  %.0f samples/s  %.1fs\n",
               (long long)epoch, (long long)a->epochs, loss_sum / (double)batches, test.loss, 100 * test.accuracy,
               (double)seen / train_seconds, cli_now() - te);
        fflush(stdout);
        cli_json_begin(&log, "epoch");
        cli_json_int(&log, "epoch", epoch);
        cli_json_int(&log, "step", step);
        cli_json_num(&log, "train_loss", loss_sum / (double)batches);
        cli_json_num(&log, "test_loss", test.loss);
        cli_json_num(&log, "test_accuracy", test.accuracy);
        cli_json_num(&log, "samples_per_s", (double)seen / train_seconds);
        cli_json_num(&log, "seconds", cli_now() - t0);
        cli_json_end(&log);
    }
    if (status == 0) {
        double wall = cli_now() - t0;
        printf("final: test accuracy %.2f%%, test loss %.4f, %.1f s wall-clock\n", 100 * test.accuracy, test.loss, wall);
        cli_json_begin(&log, "final");
        cli_json_str(&log, "model", "mlp");
        cli_json_str(&log, "data", a->data);
        cli_json_int(&log, "epochs", a->epochs);
        cli_json_int(&log, "seed", a->seed);
        cli_json_num(&log, "test_loss", test.loss);
        cli_json_num(&log, "test_accuracy", test.accuracy);
        cli_json_num(&log, "wall_seconds", wall);
        cli_json_end(&log);
    }
    cli_json_close(&log);
done:
    cml_batch_iter_destroy(it);
    cml_optim_destroy(opt);
    free(params);
    cml_module_destroy(model);
    cml_tensor_release_all((cml_tensor *[]){x_train, x_test, train_y, test_y}, 4);
    return status;
}

int cmd_train_mlp(int argc, char **argv) {
    mlp_args a = {.data = "/usr/share/datasets/fashion-mnist", .hidden = "512", .optim = "adam",
                  .schedule = "cosine", .device = "cpu", .epochs = 8, .batch = 128, .seed = 0, .lr = 1e-3,
                  .weight_decay = 0, .dropout = 0, .clip = 0, .warmup = 0, .threads = 0};
    cli_flag flags[] = {
        {"data", CLI_STRING, &a.data, "directory with the four MNIST-format IDX files (.gz or raw)"},
        {"epochs", CLI_INT, &a.epochs, "passes over the training set"},
        {"batch", CLI_INT, &a.batch, "mini-batch size"},
        {"lr", CLI_FLOAT, &a.lr, "peak learning rate"},
        {"hidden", CLI_STRING, &a.hidden, "hidden layer widths, comma-separated"},
        {"optim", CLI_STRING, &a.optim, "adam, adamw or sgd (Nesterov momentum 0.9)"},
        {"weight-decay", CLI_FLOAT, &a.weight_decay, "weight decay"},
        {"dropout", CLI_FLOAT, &a.dropout, "dropout after each hidden layer"},
        {"schedule", CLI_STRING, &a.schedule, "learning-rate schedule: constant or cosine"},
        {"warmup", CLI_INT, &a.warmup, "linear warm-up steps"},
        {"clip", CLI_FLOAT, &a.clip, "clip the global gradient norm to this value (0 = off)"},
        {"seed", CLI_INT, &a.seed, "seed for initialization and shuffling (same seed, same run)"},
        {"threads", CLI_INT, &a.threads, "CPU threads (0 = OpenMP default)"},
        {"device", CLI_STRING, &a.device, "cpu or cuda"},
        {"log", CLI_STRING, &a.log, "write JSON lines (one per epoch, then a final record) to this file"},
    };
    int rc = cli_parse(argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), "camel train mlp [options]",
                       "Trains a multilayer perceptron (ReLU) with softmax cross-entropy on MNIST-format data and "
                       "reports the test accuracy after every epoch.");
    if (rc) return rc == 1 ? 0 : rc;
    return run(&a);
}
