/* Internal: the tensor, storage and autograd-node structs, and the helpers
 * every op file uses. */
#ifndef CML_FRAMEWORK_TENSOR_IMPL_H
#define CML_FRAMEWORK_TENSOR_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "camel/autograd.h"
#include "camel/kernels.h"
#include "camel/tensor.h"
#include "runtime/error.h"

/* Reference-counted memory shared by a tensor and its views. */
typedef struct cml_storage {
    int refcount;
    void *data;
    size_t nbytes;
    cml_device device;
    const cml_allocator *alloc;
} cml_storage;

typedef struct cml_node cml_node;

struct cml_tensor {
    int refcount;
    cml_storage *storage;
    int64_t offset; /* in elements from storage->data */
    int ndim;
    int64_t shape[CML_MAX_DIMS];
    int64_t stride[CML_MAX_DIMS];
    cml_dtype dtype;
    bool requires_grad;
    cml_tensor *grad;   /* leaves: accumulated gradient (owned) */
    cml_node *grad_fn;  /* non-leaves: the node that made this tensor (owned reference) */
};

/* A backward rule: given dL/d(output), set grads[i] (new references, input i's
 * shape) for every input i with cml__wants_grad(node, i); leave others NULL. */
typedef cml_status (*cml__backward_fn)(cml_node *node, const cml_tensor *grad_out, cml_tensor **grads);

#define CML__MAX_SAVED 4

struct cml_node {
    int refcount;
    const char *name;
    cml__backward_fn backward;
    int n_inputs;
    cml_tensor **inputs;              /* retained until the graph is freed */
    cml_tensor *saved[CML__MAX_SAVED]; /* detached tensors the rule needs */
    int64_t ints[2 * CML_MAX_DIMS];   /* op parameters (dims, shapes, flags) */
    double reals[4];
    cml_tensor *grad_acc;             /* dL/d(output) accumulated during backward */
    uint64_t visit;                   /* topological-sort marker */
    bool freed;                       /* graph already freed by a backward */
    cml_node *next_free;              /* link in the queue of nodes being freed (cml__node_release) */
};

/* ---- tensors -------------------------------------------------------------- */

/* A new contiguous tensor with uninitialized memory. */
cml_tensor *cml__tensor_new(int ndim, const int64_t *shape, cml_dtype dt, cml_device dev);
/* A new tensor header sharing base's storage with the given geometry. */
cml_tensor *cml__tensor_alias(const cml_tensor *base, int ndim, const int64_t *shape,
                              const int64_t *stride, int64_t offset);
int64_t cml__numel(int ndim, const int64_t *shape);
void cml__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
/* Normalizes a possibly negative dim against ndim; -1 when out of range. */
int cml__norm_dim(int dim, int ndim);
/* The default context of the tensor's device (NULL with the error set). */
cml_ctx *cml__ctx(const cml_tensor *t);
/* Shape text "[2, 3]" into buf. */
const char *cml__shape_str(int ndim, const int64_t *shape, char *buf, size_t n);

/* Broadcasts two shapes (NumPy rules); CML_ERR_SHAPE naming `who` when they do not fit. */
cml_status cml__broadcast_shapes(const char *who, int na, const int64_t *a, int nb, const int64_t *b,
                                 int *nout, int64_t *out);
/* t's layout stretched to (ndim, shape) with stride 0 on broadcast dims. */
cml_layout cml__broadcast_layout(const cml_tensor *t, int ndim, const int64_t *shape);

/* Sums grad (a broadcast result) down to shape (ndim, shape); a new reference. */
cml_tensor *cml__sum_to_shape(const cml_tensor *grad, int ndim, const int64_t *shape);

/* ---- argument checks shared by ops -------------------------------------- */

/* NULL inputs propagate: returns true when any is NULL (keeps the earlier error,
 * or sets one naming `who` when none is set). */
bool cml__any_null(const char *who, int n, const cml_tensor *const *ts);
cml_status cml__check_same_device(const char *who, const cml_tensor *a, const cml_tensor *b);
cml_status cml__check_float(const char *who, const char *arg, const cml_tensor *t);

/* ---- autograd ------------------------------------------------------------- */

/* Whether an op over these inputs must record a node (grad mode on and some input requires grad). */
bool cml__should_record(int n, const cml_tensor *const *inputs);
/* Creates a node, retains the inputs, and attaches it to `out` (which becomes
 * requires_grad). Returns the node so the op can save what backward needs, or
 * NULL on out-of-memory (error set). */
cml_node *cml__record(cml_tensor *out, const char *name, cml__backward_fn backward, int n,
                      const cml_tensor *const *inputs);
/* Saves a detached alias of t (no history, so saving an op's own output makes no cycle). */
cml_status cml__save(cml_node *node, int slot, const cml_tensor *t);
/* Whether input i of the node needs a gradient. */
bool cml__wants_grad(const cml_node *node, int i);
void cml__node_release(cml_node *node);

#endif
