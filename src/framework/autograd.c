/* Reverse-mode autograd: recording nodes, the backward walk, grad mode. */
#include <stdlib.h>
#include <string.h>

#include "camel/ops.h"
#include "framework/tensor_impl.h"

static _Thread_local bool grad_disabled;

bool cml_grad_enabled(void) { return !grad_disabled; }

bool cml_set_grad_enabled(bool enabled) {
    bool prev = !grad_disabled;
    grad_disabled = !enabled;
    return prev;
}

/* ---- recording -------------------------------------------------------------- */

bool cml__should_record(int n, const cml_tensor *const *inputs) {
    if (grad_disabled) return false;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->requires_grad) return true;
    return false;
}

cml_node *cml__record(cml_tensor *out, const char *name, cml__backward_fn backward, int n,
                      const cml_tensor *const *inputs) {
    cml_node *node = calloc(1, sizeof *node);
    cml_tensor **ins = calloc((size_t)(n > 0 ? n : 1), sizeof *ins);
    if (!node || !ins) {
        free(node);
        free(ins);
        cml__error(CML_ERR_OOM, "out of host memory recording %s for autograd", name);
        return NULL;
    }
    node->refcount = 1;
    node->name = name;
    node->backward = backward;
    node->n_inputs = n;
    node->inputs = ins;
    for (int i = 0; i < n; i++) ins[i] = cml_tensor_retain((cml_tensor *)inputs[i]);
    cml__node_release(out->grad_fn);
    out->grad_fn = node;
    out->requires_grad = true;
    return node;
}

cml_status cml__save(cml_node *node, int slot, const cml_tensor *t) {
    CML_ASSERT(slot >= 0 && slot < CML__MAX_SAVED && !node->saved[slot]);
    node->saved[slot] = cml__tensor_alias(t, t->ndim, t->shape, t->stride, t->offset);
    return node->saved[slot] ? CML_OK : cml_last_status();
}

bool cml__wants_grad(const cml_node *node, int i) {
    return node->inputs[i] && node->inputs[i]->requires_grad;
}

/* Drops everything the node holds for backward; the node itself lives on
 * while its output tensor does. */
static void node_free_graph(cml_node *node) {
    for (int i = 0; i < node->n_inputs; i++) {
        cml_tensor_release(node->inputs[i]);
        node->inputs[i] = NULL;
    }
    for (int i = 0; i < CML__MAX_SAVED; i++) {
        cml_tensor_release(node->saved[i]);
        node->saved[i] = NULL;
    }
    cml_tensor_release(node->grad_acc);
    node->grad_acc = NULL;
    node->freed = true;
}

/* Nodes whose last reference is gone, waiting to be freed by the outermost
 * cml__node_release on this thread. */
static _Thread_local cml_node *free_queue;
static _Thread_local bool freeing;

void cml__node_release(cml_node *node) {
    if (!node || --node->refcount > 0) return;
    /* Releasing a node's inputs may release their nodes in turn. Recursing
     * once per node overflowed the C stack when a long chain (a few hundred
     * thousand ops) was released without a backward, so nested releases only
     * queue their node and the outermost call frees the queue in a loop. */
    node->next_free = free_queue;
    free_queue = node;
    if (freeing) return;
    freeing = true;
    while (free_queue) {
        cml_node *n = free_queue;
        free_queue = n->next_free;
        node_free_graph(n);
        free(n->inputs);
        free(n);
    }
    freeing = false;
}

/* ---- tensor-level autograd API ------------------------------------------------ */

void cml_tensor_set_requires_grad(cml_tensor *t, bool requires_grad) {
    if (t) t->requires_grad = requires_grad;
}

bool cml_tensor_requires_grad(const cml_tensor *t) { return t && t->requires_grad; }
cml_tensor *cml_tensor_grad(const cml_tensor *t) { return t ? t->grad : NULL; }
bool cml_tensor_has_grad_fn(const cml_tensor *t) { return t && t->grad_fn; }
const char *cml_tensor_grad_fn_name(const cml_tensor *t) { return t && t->grad_fn ? t->grad_fn->name : NULL; }

void cml_tensor_zero_grad(cml_tensor *t) {
    if (t && t->grad) cml_tensor_fill_(t->grad, 0.0);
}

void cml_tensor_clear_grad(cml_tensor *t) {
    if (!t) return;
    cml_tensor_release(t->grad);
    t->grad = NULL;
}

cml_tensor *cml_detach(const cml_tensor *t) {
    if (cml__any_null("cml_detach", 1, &t)) return NULL;
    return cml__tensor_alias(t, t->ndim, t->shape, t->stride, t->offset);
}

/* ---- backward ----------------------------------------------------------------- */

/* Adds g into *acc (creating it as a copy when empty). */
static cml_status accumulate(cml_tensor **acc, const cml_tensor *g) {
    if (!*acc) {
        *acc = cml_clone(g);
        return *acc ? CML_OK : cml_last_status();
    }
    cml_tensor *sum = cml_add(*acc, g);
    if (!sum) return cml_last_status();
    cml_tensor_release(*acc);
    *acc = sum;
    return CML_OK;
}

/* A leaf's .grad is updated in place so that views of it (optimizer state,
 * flat gradient buffers) stay valid. */
static cml_status accumulate_leaf(cml_tensor *leaf, const cml_tensor *g) {
    if (!leaf->grad) {
        leaf->grad = cml__tensor_new(leaf->ndim, leaf->shape, leaf->dtype, leaf->storage->device);
        if (!leaf->grad) return cml_last_status();
        return cml_tensor_copy_(leaf->grad, g);
    }
    cml_layout l = cml_tensor_layout(leaf->grad), gl = cml_tensor_layout(g);
    return cml_binary(cml__ctx(leaf), CML_BINARY_ADD, cml_tensor_data(leaf->grad), &l, leaf->dtype,
                      cml_tensor_data(leaf->grad), &l, leaf->dtype, cml_tensor_data(g), &gl, g->dtype);
}

typedef struct node_list {
    cml_node **items;
    int n, cap;
} node_list;

static cml_status list_push(node_list *l, cml_node *node) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        cml_node **items = realloc(l->items, (size_t)cap * sizeof *items);
        if (!items) return cml__error(CML_ERR_OOM, "cml_backward: out of host memory");
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = node;
    return CML_OK;
}

/* Post-order DFS (iterative, so deep graphs do not overflow the C stack):
 * `order` ends with the root; walking it backwards visits every node after
 * all the nodes that consume its output. */
static cml_status topo_sort(cml_node *root, node_list *order) {
    static _Thread_local uint64_t epoch;
    uint64_t mark = ++epoch * 2; /* mark = on the stack, mark + 1 = done */
    node_list stack = {0};
    cml_status s = list_push(&stack, root);
    root->visit = mark;
    while (s == CML_OK && stack.n > 0) {
        cml_node *node = stack.items[stack.n - 1];
        bool pushed = false;
        for (int i = 0; i < node->n_inputs && !pushed; i++) {
            cml_tensor *in = node->inputs[i];
            cml_node *child = in ? in->grad_fn : NULL;
            if (child && child->visit != mark && child->visit != mark + 1) {
                child->visit = mark;
                s = list_push(&stack, child);
                pushed = true;
            }
        }
        if (!pushed) {
            stack.n--;
            node->visit = mark + 1;
            if (s == CML_OK) s = list_push(order, node);
        }
    }
    free(stack.items);
    return s;
}

static cml_status run_node(cml_node *node) {
    if (node->freed)
        return cml__error(CML_ERR_STATE, "cml_backward: the graph through %s was already freed by an earlier "
                                         "backward; run the forward pass again", node->name);
    cml_tensor *grads[64] = {NULL};
    cml_tensor **gs = node->n_inputs <= 64 ? grads : calloc((size_t)node->n_inputs, sizeof *gs);
    if (!gs) return cml__error(CML_ERR_OOM, "cml_backward: out of host memory");
    cml_status s = node->backward(node, node->grad_acc, gs);
    for (int i = 0; i < node->n_inputs; i++) {
        cml_tensor *in = node->inputs[i];
        if (s == CML_OK && gs[i] && in->requires_grad) {
            if (gs[i]->ndim != in->ndim || memcmp(gs[i]->shape, in->shape, sizeof(int64_t) * (size_t)in->ndim))
                s = cml__error(CML_ERR_INTERNAL, "cml_backward: %s produced a gradient of the wrong shape for "
                                                 "input %d", node->name, i);
            else if (in->grad_fn)
                s = accumulate(&in->grad_fn->grad_acc, gs[i]);
            else
                s = accumulate_leaf(in, gs[i]);
        }
        cml_tensor_release(gs[i]);
    }
    if (gs != grads) free(gs);
    return s;
}

cml_status cml_backward(cml_tensor *root, const cml_tensor *grad_root) {
    CML_CHECK_ARG(root, "cml_backward: root must not be NULL");
    if (!root->requires_grad)
        return cml__error(CML_ERR_STATE, "cml_backward: root does not require grad (no input of the "
                                         "computation had requires_grad set, or it ran under no_grad)");
    cml_tensor *seed = NULL;
    if (grad_root) {
        if (grad_root->ndim != root->ndim || memcmp(grad_root->shape, root->shape, sizeof(int64_t) * (size_t)root->ndim))
            return cml__error(CML_ERR_SHAPE, "cml_backward: grad_root must have root's shape");
        seed = cml_tensor_retain((cml_tensor *)grad_root);
    } else {
        if (cml_tensor_numel(root) != 1)
            return cml__error(CML_ERR_SHAPE, "cml_backward: grad_root may be NULL only for a one-element root; "
                                             "root has %lld elements", (long long)cml_tensor_numel(root));
        seed = cml_tensor_ones(root->ndim, root->shape, root->dtype, root->storage->device);
        if (!seed) return cml_last_status();
    }
    bool prev = cml_set_grad_enabled(false);
    cml_status s = CML_OK;
    if (!root->grad_fn) {
        s = accumulate_leaf(root, seed);
    } else {
        node_list order = {0};
        s = topo_sort(root->grad_fn, &order);
        if (s == CML_OK && root->grad_fn->freed)
            s = cml__error(CML_ERR_STATE, "cml_backward: the graph was already freed by an earlier backward; "
                                          "run the forward pass again");
        if (s == CML_OK) s = accumulate(&root->grad_fn->grad_acc, seed);
        for (int i = order.n - 1; i >= 0 && s == CML_OK; i--) {
            cml_node *node = order.items[i];
            if (node->grad_acc) s = run_node(node);
        }
        for (int i = 0; i < order.n; i++) node_free_graph(order.items[i]);
        free(order.items);
    }
    cml_tensor_release(seed);
    cml_set_grad_enabled(prev);
    return s;
}
