/* Vision layers: Conv2d, MaxPool2d, AvgPool2d, BatchNorm2d, GlobalAvgPool. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "camel/autograd.h"
#include "camel/nn.h"
#include "framework/nn/nn_impl.h"
#include "framework/tensor_impl.h"

/* x must be 4-d with `channels` channels in the layout's channel dim. */
static bool check_input(const char *who, const cml_tensor *x, int64_t channels, bool cl) {
    char buf[160];
    int cdim = cl ? 3 : 1;
    if (x->ndim != 4 || (channels > 0 && x->shape[cdim] != channels)) {
        if (channels > 0)
            cml__error(CML_ERR_SHAPE, "%s: input %s must be 4-d %s with C=%lld channels", who,
                       cml__shape_str(x->ndim, x->shape, buf, sizeof buf), cl ? "(N, H, W, C)" : "(N, C, H, W)",
                       (long long)channels);
        else
            cml__error(CML_ERR_SHAPE, "%s: input %s must be 4-d %s", who,
                       cml__shape_str(x->ndim, x->shape, buf, sizeof buf), cl ? "(N, H, W, C)" : "(N, C, H, W)");
        return false;
    }
    return true;
}

/* ---- Conv2d ------------------------------------------------------------------- */

typedef struct conv2d_module {
    cml_module base;
    int64_t in_channels, out_channels;
    cml_conv2d_params p;
    cml_tensor *weight, *bias; /* borrowed from base.params; bias may be NULL */
} conv2d_module;

static cml_tensor *conv2d_forward(cml_module *m, const cml_tensor *x) {
    const conv2d_module *c = (const conv2d_module *)m;
    if (!check_input("cml_conv2d_forward", x, c->in_channels, c->p.channels_last)) return NULL;
    return cml_conv2d(x, c->weight, c->bias, c->p);
}

static const cml_module_ops conv2d_ops = {"Conv2d", conv2d_forward, NULL};

cml_module *cml_conv2d_create(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
                              cml_conv2d_params p, bool bias, cml_rng *rng) {
    const char *who = "cml_conv2d_create";
    const int64_t sizes[4] = {in_channels, out_channels, kernel_h, kernel_w};
    static const char *const names[4] = {"in_channels", "out_channels", "kernel_h", "kernel_w"};
    for (int i = 0; i < 4; i++)
        if (sizes[i] < 1) {
            cml__error(CML_ERR_INVALID_ARG, "%s: %s=%lld must be >= 1", who, names[i], (long long)sizes[i]);
            return NULL;
        }
    if (!rng) {
        cml__error(CML_ERR_INVALID_ARG, "%s: rng must not be NULL", who);
        return NULL;
    }
    if (p.stride_h < 0 || p.stride_w < 0 || p.pad_h < 0 || p.pad_w < 0 || p.dil_h < 0 || p.dil_w < 0 || p.groups < 0) {
        cml__error(CML_ERR_INVALID_ARG, "%s: strides, pads, dilations and groups must be >= 0 (0 means the default)",
                   who);
        return NULL;
    }
    int64_t groups = p.groups ? p.groups : 1;
    if (in_channels % groups || out_channels % groups) {
        cml__error(CML_ERR_INVALID_ARG, "%s: in_channels=%lld and out_channels=%lld must be multiples of groups=%lld",
                   who, (long long)in_channels, (long long)out_channels, (long long)groups);
        return NULL;
    }
    conv2d_module *c = (conv2d_module *)cml__module_alloc(sizeof *c, &conv2d_ops, who);
    if (!c) return NULL;
    c->in_channels = in_channels;
    c->out_channels = out_channels;
    c->p = p;
    int64_t cg = in_channels / groups;
    int64_t wshape[4] = {out_channels, cg, kernel_h, kernel_w};
    if (p.channels_last) {
        wshape[1] = kernel_h;
        wshape[2] = kernel_w;
        wshape[3] = cg;
    }
    /* PyTorch: kaiming_uniform(a = sqrt(5)) gives the bound 1/sqrt(fan_in), fan_in = C/groups * R * S;
     * the bias uses the same bound. The weight is drawn first. */
    double bound = 1.0 / sqrt((double)(cg * kernel_h * kernel_w));
    c->weight = cml_tensor_empty(4, wshape, CML_F32, CML_DEVICE_CPU);
    cml_status s = c->weight ? cml_init_uniform_(c->weight, (float)-bound, (float)bound, rng) : cml_last_status();
    if (s == CML_OK) {
        cml_tensor_set_requires_grad(c->weight, true);
        s = cml_module_add_param(&c->base, "weight", c->weight);
    } else {
        cml_tensor_release(c->weight);
        c->weight = NULL;
    }
    if (s == CML_OK && bias) {
        c->bias = cml_tensor_empty(1, &out_channels, CML_F32, CML_DEVICE_CPU);
        s = c->bias ? cml_init_uniform_(c->bias, (float)-bound, (float)bound, rng) : cml_last_status();
        if (s == CML_OK) {
            cml_tensor_set_requires_grad(c->bias, true);
            s = cml_module_add_param(&c->base, "bias", c->bias);
        } else {
            cml_tensor_release(c->bias);
            c->bias = NULL;
        }
    }
    if (s != CML_OK) {
        cml_module_destroy(&c->base);
        return NULL;
    }
    return &c->base;
}

/* ---- pooling ---------------------------------------------------------------------- */

typedef struct pool_module {
    cml_module base;
    int64_t kernel, stride, pad;
    bool cl;
} pool_module;

static cml_tensor *maxpool_forward(cml_module *m, const cml_tensor *x) {
    const pool_module *p = (const pool_module *)m;
    if (!check_input("cml_maxpool2d_forward", x, 0, p->cl)) return NULL;
    return cml_max_pool2d(x, p->kernel, p->kernel, p->stride, p->stride, p->pad, p->pad, p->cl);
}

static cml_tensor *avgpool_forward(cml_module *m, const cml_tensor *x) {
    const pool_module *p = (const pool_module *)m;
    if (!check_input("cml_avgpool2d_forward", x, 0, p->cl)) return NULL;
    return cml_avg_pool2d(x, p->kernel, p->kernel, p->stride, p->stride, p->pad, p->pad, p->cl);
}

static const cml_module_ops maxpool_ops = {"MaxPool2d", maxpool_forward, NULL};
static const cml_module_ops avgpool_ops = {"AvgPool2d", avgpool_forward, NULL};

static cml_module *pool_create(const char *who, const cml_module_ops *ops, int64_t kernel, int64_t stride,
                               int64_t pad, bool cl) {
    if (kernel < 1 || stride < 0 || pad < 0 || pad > kernel / 2) {
        cml__error(CML_ERR_INVALID_ARG,
                   "%s: kernel=%lld must be >= 1, stride=%lld >= 0 (0 = kernel) and pad=%lld in [0, kernel/2]", who,
                   (long long)kernel, (long long)stride, (long long)pad);
        return NULL;
    }
    pool_module *p = (pool_module *)cml__module_alloc(sizeof *p, ops, who);
    if (!p) return NULL;
    p->kernel = kernel;
    p->stride = stride ? stride : kernel;
    p->pad = pad;
    p->cl = cl;
    return &p->base;
}

cml_module *cml_maxpool2d_create(int64_t kernel, int64_t stride, int64_t pad, bool channels_last) {
    return pool_create("cml_maxpool2d_create", &maxpool_ops, kernel, stride, pad, channels_last);
}

cml_module *cml_avgpool2d_create(int64_t kernel, int64_t stride, int64_t pad, bool channels_last) {
    return pool_create("cml_avgpool2d_create", &avgpool_ops, kernel, stride, pad, channels_last);
}

/* ---- BatchNorm2d --------------------------------------------------------------------- */

typedef struct batchnorm_module {
    cml_module base;
    int64_t channels;
    float momentum, eps;
    bool cl;
    cml_tensor *weight, *bias, *running_mean, *running_var; /* borrowed */
} batchnorm_module;

static cml_tensor *batchnorm_forward(cml_module *m, const cml_tensor *x) {
    batchnorm_module *b = (batchnorm_module *)m;
    if (!check_input("cml_batchnorm2d_forward", x, b->channels, b->cl)) return NULL;
    return cml_batch_norm2d(x, b->weight, b->bias, b->running_mean, b->running_var, m->training, b->momentum, b->eps,
                            b->cl);
}

static const cml_module_ops batchnorm_ops = {"BatchNorm2d", batchnorm_forward, NULL};

cml_module *cml_batchnorm2d_create(int64_t channels, float momentum, float eps, bool channels_last) {
    const char *who = "cml_batchnorm2d_create";
    if (channels < 1 || !(momentum >= 0.0f && momentum <= 1.0f) || !(eps >= 0.0f) || !isfinite(eps)) {
        cml__error(CML_ERR_INVALID_ARG,
                   "%s: channels=%lld must be >= 1, momentum=%g in [0, 1] and eps=%g finite and >= 0 "
                   "(PyTorch's defaults: momentum 0.1, eps 1e-5)",
                   who, (long long)channels, (double)momentum, (double)eps);
        return NULL;
    }
    batchnorm_module *b = (batchnorm_module *)cml__module_alloc(sizeof *b, &batchnorm_ops, who);
    if (!b) return NULL;
    b->channels = channels;
    b->momentum = momentum;
    b->eps = eps;
    b->cl = channels_last;
    b->weight = cml_tensor_ones(1, &channels, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(b->weight, true);
    cml_status s = b->weight ? cml_module_add_param(&b->base, "weight", b->weight) : cml_last_status();
    if (s == CML_OK) {
        b->bias = cml_tensor_zeros(1, &channels, CML_F32, CML_DEVICE_CPU);
        cml_tensor_set_requires_grad(b->bias, true);
        s = b->bias ? cml_module_add_param(&b->base, "bias", b->bias) : cml_last_status();
    }
    if (s == CML_OK) {
        b->running_mean = cml_tensor_zeros(1, &channels, CML_F32, CML_DEVICE_CPU);
        s = b->running_mean ? cml_module_add_buffer(&b->base, "running_mean", b->running_mean) : cml_last_status();
    }
    if (s == CML_OK) {
        b->running_var = cml_tensor_ones(1, &channels, CML_F32, CML_DEVICE_CPU);
        s = b->running_var ? cml_module_add_buffer(&b->base, "running_var", b->running_var) : cml_last_status();
    }
    if (s != CML_OK) {
        cml_module_destroy(&b->base);
        return NULL;
    }
    return &b->base;
}

/* ---- GlobalAvgPool --------------------------------------------------------------------- */

typedef struct gap_module {
    cml_module base;
    bool cl;
} gap_module;

static cml_tensor *gap_forward(cml_module *m, const cml_tensor *x) {
    const gap_module *g = (const gap_module *)m;
    if (!check_input("cml_global_avgpool_forward", x, 0, g->cl)) return NULL;
    static const int nchw[2] = {2, 3}, nhwc[2] = {1, 2};
    return cml_mean(x, g->cl ? nhwc : nchw, 2, false);
}

static const cml_module_ops gap_ops = {"GlobalAvgPool", gap_forward, NULL};

cml_module *cml_global_avgpool_create(bool channels_last) {
    gap_module *g = (gap_module *)cml__module_alloc(sizeof *g, &gap_ops, "cml_global_avgpool_create");
    if (g) g->cl = channels_last;
    return g ? &g->base : NULL;
}
