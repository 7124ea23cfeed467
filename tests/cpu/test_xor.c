/* End-to-end on the smallest problem that needs a hidden layer: XOR. */
#include "harness.h"

static void test_xor_trains_to_100_percent(void) {
    const float xs[8] = {0, 0, 0, 1, 1, 0, 1, 1};
    const int64_t ys[4] = {0, 1, 1, 0};
    cml_tensor *x = cml_tensor_from_host(xs, 2, (int64_t[]){4, 2}, CML_F32, CML_DEVICE_CPU);
    cml_tensor *y = cml_tensor_from_host(ys, 1, (int64_t[]){4}, CML_I64, CML_DEVICE_CPU);
    cml_rng rng;
    cml_rng_init(&rng, 7);
    cml_module *mlp = cml_mlp_create((int64_t[]){2, 8, 2}, 3, CML_ACT_TANH, 0.0f, &rng);
    CHECK_NOT_NULL(mlp);
    if (!mlp) return;
    cml_param params[8];
    int n = cml_module_parameters(mlp, params, 8);
    CHECK(n == 4);
    cml_optim *opt = cml_adam_create(params, n, (cml_adam_opts){.lr = 0.05f});
    CHECK_NOT_NULL(opt);
    double loss_value = 0;
    for (int step = 0; step < 300 && opt; step++) {
        cml_tensor *logits = cml_module_forward(mlp, x);
        cml_tensor *loss = cml_cross_entropy(logits, y, -100, CML_REDUCTION_MEAN);
        CHECK_OK(cml_backward(loss, NULL));
        CHECK_OK(cml_optim_step(opt));
        cml_optim_zero_grad(opt);
        loss_value = cml_tensor_item(loss);
        cml_tensor_release_all((cml_tensor *[]){logits, loss}, 2);
    }
    CHECK_MSG(loss_value < 0.05, "final loss %g", loss_value);
    cml_tensor *logits = cml_module_forward(mlp, x);
    cml_tensor *pred = cml_argmax(logits, 1, false);
    CHECK_NOT_NULL(pred);
    if (pred) {
        const int64_t *p = cml_tensor_data(pred);
        for (int i = 0; i < 4; i++) CHECK_MSG(p[i] == ys[i], "sample %d predicted %lld", i, (long long)p[i]);
    }
    cml_tensor_release_all((cml_tensor *[]){logits, pred, x, y}, 4);
    cml_optim_destroy(opt);
    cml_module_destroy(mlp);
}

int main(void) {
    RUN(test_xor_trains_to_100_percent);
    return th_finish();
}
