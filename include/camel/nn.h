/* Neural-network modules, parameters and initializers.
 *
 * A module owns its parameters (leaf tensors that require grad) and its
 * children; cml_module_destroy frees them all. Parameters are enumerable with
 * dotted names ("layers.0.weight") for optimizers and checkpoints.
 *
 * Writing a module: embed cml_module as the first member of your struct,
 * allocate the struct zeroed with calloc (cml_module_destroy frees it with
 * free), fill `ops`, set `training = true`, register parameters with
 * cml_module_add_param and children with cml_module_add_child.
 */
#ifndef CAMEL_NN_H
#define CAMEL_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "camel/ops.h"
#include "camel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CML_NAME_MAX 96

typedef struct cml_param {
    char name[CML_NAME_MAX];
    cml_tensor *tensor; /* borrowed from the module that owns it */
} cml_param;

typedef struct cml_module cml_module;

typedef struct cml_module_ops {
    const char *type; /* "Linear" */
    /* Returns a new tensor (owned by the caller) or NULL with the error set. */
    cml_tensor *(*forward)(cml_module *m, const cml_tensor *x);
    /* Frees what the module holds beyond its params and children (may be NULL). */
    void (*destroy)(cml_module *m);
} cml_module_ops;

struct cml_module {
    const cml_module_ops *ops;
    bool training;
    int n_params;
    char (*param_names)[CML_NAME_MAX];
    cml_tensor **params;
    int n_children;
    char (*child_names)[CML_NAME_MAX];
    cml_module **children;
    int n_buffers; /* state that is saved but not trained (BatchNorm running stats) */
    char (*buffer_names)[CML_NAME_MAX];
    cml_tensor **buffers;
};

/* For module implementations: the module takes ownership of t / child, even
 * when the call fails (it is then released / destroyed). Names are 1 to
 * CML_NAME_MAX-1 characters without '.', unique among m's params and children. */
cml_status cml_module_add_param(cml_module *m, const char *name, cml_tensor *t);
cml_status cml_module_add_child(cml_module *m, const char *name, cml_module *child);

/* A buffer: a tensor saved with the module (checkpoints) but not trained, such as
 * BatchNorm's running statistics. Ownership passes as for parameters. */
cml_status cml_module_add_buffer(cml_module *m, const char *name, cml_tensor *t);

cml_tensor *cml_module_forward(cml_module *m, const cml_tensor *x);
/* Sets training mode on m and every descendant (affects Dropout, BatchNorm). */
void cml_module_train(cml_module *m, bool training);
/* Writes up to cap parameters (depth-first: own params first, then each child's
 * in registration order; dotted names) and returns how many the module has in
 * total (call with cap = 0 to count). Returns -1 with the error set when m is
 * NULL, cap < 0, out is NULL with cap > 0, or a dotted name would not fit in
 * CML_NAME_MAX. */
int cml_module_parameters(const cml_module *m, cml_param *out, int cap);
/* Like cml_module_parameters, for buffers. */
int cml_module_buffers(const cml_module *m, cml_param *out, int cap);
int64_t cml_module_num_elements(const cml_module *m);
void cml_module_destroy(cml_module *m); /* NULL is allowed */

/* Moves every parameter and float buffer of m and its descendants (and their
 * gradients) to dev, in place (integer buffers, host-side state such as
 * Dropout's generator words, stay on the CPU): each tensor keeps its identity (pointers held
 * by the module, cml_param lists and layer structs stay valid) and gets a
 * new storage on dev with the same values; its old storage is released
 * (freed unless a view still shares it: such views keep the old values).
 * Take optimizers and their state after the move (state is allocated on the
 * parameter's device when the optimizer is created). On failure some tensors
 * may already be moved; the error is set. Synchronous (waits for the copies). */
cml_status cml_module_to(cml_module *m, cml_device dev);

/* ---- layers ------------------------------------------------------------------ */

/* y = x W^T + b with W (out, in), b (out), for x (..., in) with any leading
 * dims (CML_ERR_SHAPE when the last dim is not in_features). PyTorch's default
 * init: W and b uniform in +-1/sqrt(in) (Kaiming-uniform with a = sqrt(5)),
 * W drawn first, from rng (not NULL). Parameters are "weight" and "bias". */
cml_module *cml_linear_create(int64_t in_features, int64_t out_features, bool bias, cml_rng *rng);
cml_module *cml_relu_create(void);
cml_module *cml_gelu_create(cml_gelu_approx approx);
cml_module *cml_tanh_create(void);
/* Dropout draws its masks from its own generator, seeded here. */
cml_module *cml_dropout_create(float p, uint64_t seed);
/* Flattens all dims but the first. */
cml_module *cml_flatten_create(void);
/* Takes ownership of the n modules, also when it fails. Children are named
 * "0", "1", ...; an error in a child's forward is reported as
 * "cml_sequential_forward: child i (Type): <the child's message>" with the
 * child's status. n = 0 gives the identity. */
cml_module *cml_sequential_create(cml_module *const *mods, int n);

typedef enum cml_activation { CML_ACT_RELU = 0, CML_ACT_GELU, CML_ACT_TANH } cml_activation;
/* Linear(sizes[0], sizes[1]) act [dropout] Linear(...) ... Linear(sizes[n-2], sizes[n-1]),
 * as a Sequential (so parameters are "0.weight", "0.bias", ...). CML_ACT_GELU
 * is the exact (erf) GELU, like torch.nn.GELU(). Dropout (when dropout > 0)
 * is seeded from two words of rng, drawn after the preceding Linear's init. */
cml_module *cml_mlp_create(const int64_t *sizes, int n_sizes, cml_activation act, float dropout, cml_rng *rng);

/* ---- initializers (in place, not recorded by autograd) ---------------------------- */

/* t must be a contiguous f32 CPU tensor (CML_ERR_DTYPE / CML_ERR_INVALID_ARG /
 * CML_ERR_UNSUPPORTED otherwise). Uniform draws are exactly cml_tensor_rand's
 * and normal draws cml_tensor_randn's for the same generator state.
 * Kaiming: std = gain / sqrt(fan_in); xavier: std = gain * sqrt(2 / (fan_in + fan_out));
 * the uniform variants use the bound sqrt(3) * std. PyTorch's gains: sqrt(2) for
 * ReLU, sqrt(1/3) for nn.Linear's default (kaiming_uniform with a = sqrt(5)).
 * These four need t->ndim >= 2 (CML_ERR_SHAPE) and gain >= 0. */

cml_status cml_init_uniform_(cml_tensor *t, float low, float high, cml_rng *rng);
cml_status cml_init_normal_(cml_tensor *t, float mean, float std, cml_rng *rng);
/* fan_in = size(1) * prod(size(2:)), fan_out = size(0) * prod(size(2:)) as in PyTorch. */
cml_status cml_init_kaiming_uniform_(cml_tensor *t, float gain, cml_rng *rng);
cml_status cml_init_kaiming_normal_(cml_tensor *t, float gain, cml_rng *rng);
cml_status cml_init_xavier_uniform_(cml_tensor *t, float gain, cml_rng *rng);
cml_status cml_init_xavier_normal_(cml_tensor *t, float gain, cml_rng *rng);

/* ---- transformer layers ----------------------------------------------------------- */

/* Embedding (num, dim), weights N(0, 1) as in PyTorch; forward takes integer indices. */
cml_module *cml_embedding_create(int64_t num, int64_t dim, cml_rng *rng);
/* LayerNorm over the last dim with gamma = 1, beta = 0. */
cml_module *cml_layernorm_create(int64_t dim, float eps);
/* RMSNorm over the last dim with a weight ("weight", gamma = 1); no bias. */
cml_module *cml_rmsnorm_create(int64_t dim, float eps);
/* GPT-2 causal self-attention on (B, T, C): "c_attn" Linear(C, 3C), heads of C/n_head,
 * cml_attention with causal masking, "c_proj" Linear(C, C), dropout on the output. */
cml_module *cml_causal_self_attention_create(int64_t dim, int64_t n_head, float dropout, cml_rng *rng);
/* y = x + inner(x); takes ownership of inner (child "inner"). */
cml_module *cml_residual_create(cml_module *inner);

/* ---- vision layers ------------------------------------------------------------------ */

/* Conv2d with PyTorch's default init (kaiming-uniform a = sqrt(5), bias +-1/sqrt(fan_in)). */
cml_module *cml_conv2d_create(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
                              cml_conv2d_params p, bool bias, cml_rng *rng);
cml_module *cml_maxpool2d_create(int64_t kernel, int64_t stride, int64_t pad, bool channels_last);
cml_module *cml_avgpool2d_create(int64_t kernel, int64_t stride, int64_t pad, bool channels_last);
/* BatchNorm2d with gamma/beta parameters and running_mean/running_var buffers. */
cml_module *cml_batchnorm2d_create(int64_t channels, float momentum, float eps, bool channels_last);
/* Mean over the spatial dims: (N, C, H, W) -> (N, C) (or NHWC -> (N, C)). */
cml_module *cml_global_avgpool_create(bool channels_last);

#ifdef __cplusplus
}
#endif
#endif
