/* The training loop shared by `camel train mlp` and `camel train cnn`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "classifier.h"
#include "cli.h"

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
    for (int64_t start = 0; start < n && s == CML_OK; start += 500) {
        int64_t stop = start + 500 < n ? start + 500 : n;
        cml_tensor *xb = cml_slice(x, 0, start, stop, 1), *yb = cml_slice(y, 0, start, stop, 1);
        cml_tensor *logits = cml_module_forward(model, xb);
        cml_tensor *loss = cml_cross_entropy(logits, yb, -100, CML_REDUCTION_SUM);
        cml_tensor *pred = cml_argmax(logits, 1, false);
        if (!loss || !pred) {
            s = cml_last_status();
        } else {
            loss_sum += cml_tensor_item(loss);
            /* predictions and labels are compared on the host (copied back when on a GPU) */
            cml_tensor *ph = cml_tensor_to(pred, CML_DEVICE_CPU), *th = cml_tensor_to(yb, CML_DEVICE_CPU);
            cml_tensor *tc = th ? cml_contiguous(th) : NULL;
            if (!ph || !tc) {
                s = cml_last_status();
            } else {
                const int64_t *p = cml_tensor_data(ph), *t = cml_tensor_data(tc);
                for (int64_t i = 0; i < stop - start; i++) correct += p[i] == t[i];
            }
            cml_tensor_release_all((cml_tensor *[]){ph, th, tc}, 3);
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
static double train_step(cml_module *model, cml_optim *opt, double clip, const cml_tensor *x, const cml_tensor *y,
                         const cml_tensor *idx_cpu) {
    /* the batch iterator gives CPU indices: they go to the data's device first */
    cml_tensor *idx = cml_tensor_to(idx_cpu, cml_tensor_device(x));
    cml_tensor *xb = idx ? cml_index_select(x, 0, idx) : NULL, *yb = idx ? cml_index_select(y, 0, idx) : NULL;
    cml_tensor *logits = cml_module_forward(model, xb);
    cml_tensor *loss = cml_cross_entropy(logits, yb, -100, CML_REDUCTION_MEAN);
    double value = NAN;
    if (loss && cml_backward(loss, NULL) == CML_OK &&
        (clip <= 0 || cml_optim_clip_grad_norm(opt, clip) == CML_OK) && cml_optim_step(opt) == CML_OK) {
        value = cml_tensor_item(loss);
        cml_optim_zero_grad(opt);
    }
    cml_tensor_release_all((cml_tensor *[]){idx, xb, yb, logits, loss}, 5);
    return value;
}

static cml_optim *make_optimizer(const classifier_opts *o, const cml_param *params, int n) {
    if (strcmp(o->optim, "sgd") == 0)
        return cml_sgd_create(params, n, (cml_sgd_opts){(float)o->lr, 0.9f, true, (float)o->weight_decay});
    cml_adam_opts a = {(float)o->lr, 0.9f, 0.999f, 1e-8f, (float)o->weight_decay};
    return strcmp(o->optim, "adam") == 0 ? cml_adam_create(params, n, a) : cml_adamw_create(params, n, a);
}

int classifier_check(const classifier_opts *o) {
    if (strcmp(o->optim, "adam") != 0 && strcmp(o->optim, "adamw") != 0 && strcmp(o->optim, "sgd") != 0) {
        fprintf(stderr, "camel: --optim must be adam, adamw or sgd (got \"%s\")\n", o->optim);
        return 2;
    }
    if (strcmp(o->schedule, "cosine") != 0 && strcmp(o->schedule, "constant") != 0) {
        fprintf(stderr, "camel: --schedule must be cosine or constant (got \"%s\")\n", o->schedule);
        return 2;
    }
    if (o->epochs < 1 || o->batch < 1 || !(o->lr > 0) || o->warmup < 0 || o->threads < 0 || o->clip < 0) {
        fprintf(stderr, "camel: need --epochs >= 1, --batch >= 1, --lr > 0, --warmup >= 0, --clip >= 0 and "
                        "--threads >= 0\n");
        return 2;
    }
    if (o->threads > 0) cml_set_cpu_threads((int)o->threads);
    cml_device dev;
    if (cml_device_parse(o->device, &dev) != CML_OK) return cli_fail("--device", "use --device cpu or --device cuda");
    if (dev.type != CML_CPU) {
        if (!cml_ctx_default(dev))
            return cli_fail("cannot use the GPU", "run with --device cpu (the default), or on a machine with an "
                                                  "NVIDIA GPU");
    }
    return 0;
}

static void log_epoch(cli_json *log, int64_t epoch, int64_t step, double train_loss, const eval_result *test,
                      double samples_per_s, double seconds) {
    cli_json_begin(log, "epoch");
    cli_json_int(log, "epoch", epoch);
    cli_json_int(log, "step", step);
    cli_json_num(log, "train_loss", train_loss);
    cli_json_num(log, "test_loss", test->loss);
    cli_json_num(log, "test_accuracy", test->accuracy);
    cli_json_num(log, "samples_per_s", samples_per_s);
    cli_json_num(log, "seconds", seconds);
    cli_json_end(log);
}

int classifier_train(cml_module *model, const char *model_name, const classifier_data *d,
                     const classifier_opts *o) {
    double t0 = d->t0;
    int64_t n_train = cml_tensor_size(d->x_train, 0);
    /* --device (checked by classifier_check): the model and the data move there once, before the
     * optimizer takes the parameters (its state is allocated on their device) */
    cml_device dev = CML_DEVICE_CPU;
    cml_device_parse(o->device, &dev);
    if (cml_module_to(model, dev) != CML_OK) return cli_fail("moving the model to the device", NULL);
    classifier_data dd = *d;
    cml_tensor *moved[4] = {cml_tensor_to(d->x_train, dev), cml_tensor_to(d->y_train, dev),
                            cml_tensor_to(d->x_test, dev), cml_tensor_to(d->y_test, dev)};
    if (!moved[0] || !moved[1] || !moved[2] || !moved[3]) {
        cml_tensor_release_all(moved, 4);
        return cli_fail("moving the data to the device", NULL);
    }
    dd.x_train = moved[0];
    dd.y_train = moved[1];
    dd.x_test = moved[2];
    dd.y_test = moved[3];
    d = &dd;
    int n_params = cml_module_parameters(model, NULL, 0);
    cml_param *params = calloc((size_t)(n_params > 0 ? n_params : 1), sizeof *params);
    if (params) cml_module_parameters(model, params, n_params);
    cml_optim *opt = params ? make_optimizer(o, params, n_params) : NULL;
    cml_batch_iter *it = cml_batch_iter_create(n_train, o->batch, true, false, (uint64_t)o->seed + 1);
    cli_json log;
    int status = 0;
    if (!params || !opt || !it) status = cli_fail("setting up training", NULL);
    else if (!cli_json_open(&log, o->log)) status = 1;
    if (status) goto done;
    printf("model: %s, %lld parameters, %s lr %g, batch %lld, %lld epochs, on %s, %d CPU threads\n", model_name,
           (long long)cml_module_num_elements(model), o->optim, o->lr, (long long)o->batch, (long long)o->epochs,
           cml_device_name(dev), cml_cpu_threads());

    int64_t step = 0;
    cml_lr_schedule sched = {strcmp(o->schedule, "cosine") == 0 ? CML_LR_COSINE : CML_LR_CONSTANT, o->lr, o->warmup,
                             cml_batch_iter_batches(it) * o->epochs, 0.0, 0, 0};
    eval_result test = {NAN, 0};
    for (int64_t epoch = 1; epoch <= o->epochs && status == 0; epoch++) {
        double te = cli_now(), loss_sum = 0;
        int64_t seen = 0, batches = 0;
        char label[32];
        snprintf(label, sizeof label, "epoch %lld/%lld", (long long)epoch, (long long)o->epochs);
        cli_progress progress;
        cli_progress_start(&progress, label, n_train, "samples");
        if (epoch > 1) cml_batch_iter_reset(it);
        const cml_tensor *idx;
        while ((idx = cml_batch_iter_next(it)) != NULL) {
            cml_optim_set_lr(opt, (float)cml_lr_at(&sched, step++));
            double loss = train_step(model, opt, o->clip, d->x_train, d->y_train, idx);
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
        if (evaluate(model, d->x_test, d->y_test, &test) != CML_OK) {
            status = cli_fail("evaluation", NULL);
            break;
        }
        printf("epoch %lld/%lld  train loss %.4f  test loss %.4f  test accuracy %.2f%%  %.0f samples/s  %.1fs\n",
               (long long)epoch, (long long)o->epochs, loss_sum / (double)batches, test.loss, 100 * test.accuracy,
               (double)seen / train_seconds, cli_now() - te);
        fflush(stdout);
        log_epoch(&log, epoch, step, loss_sum / (double)batches, &test, (double)seen / train_seconds, cli_now() - t0);
    }
    if (status == 0) {
        double wall = cli_now() - t0;
        printf("final: test accuracy %.2f%%, test loss %.4f, %.1f s wall-clock\n", 100 * test.accuracy, test.loss, wall);
        cli_json_begin(&log, "final");
        cli_json_str(&log, "model", model_name);
        cli_json_str(&log, "data", d->name);
        cli_json_int(&log, "epochs", o->epochs);
        cli_json_int(&log, "seed", o->seed);
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
    cml_tensor_release_all(moved, 4);
    return status;
}
