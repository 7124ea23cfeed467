/* The training loop shared by `camel train mlp` and `camel train cnn`: mini-batch
 * training of an image classifier with softmax cross-entropy, a progress bar, a
 * per-epoch test evaluation and a JSON-lines log. */
#ifndef CAMEL_CLASSIFIER_H
#define CAMEL_CLASSIFIER_H

#include "camel/camel.h"

/* The flags both commands share (see classifier_flags in classifier.c). */
typedef struct classifier_opts {
    const char *optim, *schedule, *log, *device;
    int64_t epochs, batch, seed, warmup, threads;
    double lr, weight_decay, clip;
} classifier_opts;

typedef struct classifier_data {
    const cml_tensor *x_train, *y_train, *x_test, *y_test; /* f32 inputs, i64 labels */
    const char *name;                                      /* data directory, for the log */
    double t0;                                             /* when the command started (cli_now) */
} classifier_data;

/* The flag table entries of the shared options, for a cli_flag array. */
#define CLASSIFIER_FLAGS(o)                                                                              \
    {"epochs", CLI_INT, &(o).epochs, "passes over the training set"},                                   \
    {"batch", CLI_INT, &(o).batch, "mini-batch size"},                                                  \
    {"lr", CLI_FLOAT, &(o).lr, "peak learning rate"},                                                   \
    {"optim", CLI_STRING, &(o).optim, "adam, adamw or sgd (Nesterov momentum 0.9)"},                    \
    {"weight-decay", CLI_FLOAT, &(o).weight_decay, "weight decay"},                                     \
    {"schedule", CLI_STRING, &(o).schedule, "learning-rate schedule: constant or cosine"},              \
    {"warmup", CLI_INT, &(o).warmup, "linear warm-up steps"},                                           \
    {"clip", CLI_FLOAT, &(o).clip, "clip the global gradient norm to this value (0 = off)"},            \
    {"seed", CLI_INT, &(o).seed, "seed for initialization and shuffling (same seed, same run)"},        \
    {"threads", CLI_INT, &(o).threads, "CPU threads (0 = OpenMP default)"},                             \
    {"device", CLI_STRING, &(o).device, "cpu or cuda"},                                                 \
    {"log", CLI_STRING, &(o).log, "write JSON lines (one per epoch, then a final record) to this file"}

/* Checks the shared options and applies --threads and --device; prints a message and
 * returns non-zero when they are wrong. */
int classifier_check(const classifier_opts *o);

/* Trains `model` (which the caller owns) and prints / logs as described above; the
 * final log record carries "model": model_name. Returns the process exit code. */
int classifier_train(cml_module *model, const char *model_name, const classifier_data *d,
                     const classifier_opts *o);

#endif
