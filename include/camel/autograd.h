/* Reverse-mode automatic differentiation.
 *
 * Ops on tensors that require gradients record a node (the op's backward rule
 * and what it saved) on their output. cml_backward walks the nodes in reverse
 * topological order, accumulates gradients (+=) into the leaves' .grad and
 * frees the graph: the nodes drop their inputs and saved tensors, so a
 * second backward through the same graph is a CML_ERR_STATE error.
 */
#ifndef CAMEL_AUTOGRAD_H
#define CAMEL_AUTOGRAD_H

#include <stdbool.h>

#include "camel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

void cml_tensor_set_requires_grad(cml_tensor *t, bool requires_grad);
bool cml_tensor_requires_grad(const cml_tensor *t);
/* The accumulated gradient of a leaf (borrowed; NULL before the first backward). */
cml_tensor *cml_tensor_grad(const cml_tensor *t);
/* Zeroes the gradient in place (keeps its memory). */
void cml_tensor_zero_grad(cml_tensor *t);
/* Drops the gradient (frees its memory). */
void cml_tensor_clear_grad(cml_tensor *t);
/* True when t was produced by a recorded op (it has a backward node). */
bool cml_tensor_has_grad_fn(const cml_tensor *t);
/* Name of the op that produced t ("mul", "matmul"), or NULL for leaves. */
const char *cml_tensor_grad_fn_name(const cml_tensor *t);

/* A view of t's data that records no history and does not require grad. */
cml_tensor *cml_detach(const cml_tensor *t);

/* Runs backward from `root`. grad_root is dL/droot; it may be NULL when root
 * has one element (then 1 is used). */
cml_status cml_backward(cml_tensor *root, const cml_tensor *grad_root);

/* Grad mode is per thread. While disabled (no_grad), ops record nothing. */
bool cml_grad_enabled(void);
/* Sets grad mode and returns the previous value, so a scope reads:
 *   bool prev = cml_set_grad_enabled(false); ...; cml_set_grad_enabled(prev); */
bool cml_set_grad_enabled(bool enabled);

/* ---- gradient checking ------------------------------------------------------ */

/* A function of n_inputs tensors to one tensor, for cml_gradcheck. */
typedef cml_tensor *(*cml_grad_fn)(cml_tensor *const *inputs, int n_inputs, void *user);

typedef struct cml_gradcheck_opts {
    double eps;  /* finite-difference step (default 1e-3) */
    double atol; /* default 1e-3 */
    double rtol; /* default 1e-2 */
    uint64_t seed; /* for the random projection of the output */
} cml_gradcheck_opts;

/* Checks the analytic gradient of f against central finite differences.
 * The output is projected onto a fixed random vector w so the check covers a
 * scalar L = sum(w * f(x)) accumulated in float64; every element of every input
 * that requires grad is perturbed by +-eps. Returns CML_OK when
 * |analytic - numeric| <= atol + rtol * |numeric| for all elements, otherwise
 * CML_ERR_INTERNAL with a message naming the input, element and both values.
 * opts may be NULL for the defaults. Inputs must be f32 CPU tensors. */
cml_status cml_gradcheck(cml_grad_fn f, cml_tensor *const *inputs, int n_inputs, void *user,
                         const cml_gradcheck_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
