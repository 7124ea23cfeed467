/* The module base: parameter and child registration, enumeration with dotted
 * names, training mode and recursive destruction. */
#include <stdlib.h>
#include <string.h>

#include "camel/autograd.h"
#include "camel/nn.h"
#include "framework/nn/nn_impl.h"
#include "framework/tensor_impl.h"

/* Arrays grow to the next power of two: n entries have room for cap(n) where
 * cap is n rounded up to a power of two, so an append reallocates only when n
 * is 0 or a power of two. */
static bool needs_growth(int n) { return n == 0 || (n & (n - 1)) == 0; }

static cml_status grow(void **arr, int n, size_t elem, const char *who) {
    if (!needs_growth(n)) return CML_OK;
    size_t cap = n == 0 ? 1 : 2 * (size_t)n;
    void *p = realloc(*arr, cap * elem);
    if (!p) return cml__error(CML_ERR_OOM, "%s: out of memory growing to %zu entries", who, cap);
    *arr = p;
    return CML_OK;
}

static cml_status check_name(const char *who, const cml_module *m, const char *name) {
    CML_CHECK_ARG(m, "%s: m must not be NULL", who);
    CML_CHECK_ARG(name, "%s: name must not be NULL", who);
    size_t len = strlen(name);
    CML_CHECK_ARG(len >= 1 && len < CML_NAME_MAX, "%s: name \"%.40s\" must have 1 to %d characters", who, name,
                  CML_NAME_MAX - 1);
    CML_CHECK_ARG(strchr(name, '.') == NULL, "%s: name \"%s\" must not contain '.'", who, name);
    for (int i = 0; i < m->n_params; i++)
        CML_CHECK_ARG(strcmp(m->param_names[i], name) != 0, "%s: a parameter named \"%s\" already exists", who, name);
    for (int i = 0; i < m->n_children; i++)
        CML_CHECK_ARG(strcmp(m->child_names[i], name) != 0, "%s: a child named \"%s\" already exists", who, name);
    for (int i = 0; i < m->n_buffers; i++)
        CML_CHECK_ARG(strcmp(m->buffer_names[i], name) != 0, "%s: a buffer named \"%s\" already exists", who, name);
    return CML_OK;
}

cml_module *cml__module_alloc(size_t size, const cml_module_ops *ops, const char *who) {
    cml_module *m = calloc(1, size);
    if (!m) {
        cml__error(CML_ERR_OOM, "%s: out of memory", who);
        return NULL;
    }
    m->ops = ops;
    m->training = true;
    return m;
}

cml_status cml_module_add_param(cml_module *m, const char *name, cml_tensor *t) {
    const char *who = "cml_module_add_param";
    cml_status s = check_name(who, m, name);
    if (s == CML_OK && !t) s = cml__error(CML_ERR_INVALID_ARG, "%s: tensor for \"%s\" must not be NULL", who, name);
    if (s == CML_OK && t->grad_fn)
        s = cml__error(CML_ERR_INVALID_ARG, "%s: tensor for \"%s\" must be a leaf (it was produced by '%s')", who,
                       name, t->grad_fn->name);
    if (s == CML_OK) s = grow((void **)&m->param_names, m->n_params, sizeof *m->param_names, who);
    if (s == CML_OK) s = grow((void **)&m->params, m->n_params, sizeof *m->params, who);
    if (s != CML_OK) {
        cml_tensor_release(t); /* ownership passes even on failure */
        return s;
    }
    memcpy(m->param_names[m->n_params], name, strlen(name) + 1);
    m->params[m->n_params++] = t;
    return CML_OK;
}

cml_status cml_module_add_buffer(cml_module *m, const char *name, cml_tensor *t) {
    const char *who = "cml_module_add_buffer";
    cml_status s = check_name(who, m, name);
    if (s == CML_OK && !t) s = cml__error(CML_ERR_INVALID_ARG, "%s: tensor for \"%s\" must not be NULL", who, name);
    if (s == CML_OK) s = grow((void **)&m->buffer_names, m->n_buffers, sizeof *m->buffer_names, who);
    if (s == CML_OK) s = grow((void **)&m->buffers, m->n_buffers, sizeof *m->buffers, who);
    if (s != CML_OK) {
        cml_tensor_release(t);
        return s;
    }
    memcpy(m->buffer_names[m->n_buffers], name, strlen(name) + 1);
    m->buffers[m->n_buffers++] = t;
    return CML_OK;
}

cml_status cml_module_add_child(cml_module *m, const char *name, cml_module *child) {
    const char *who = "cml_module_add_child";
    cml_status s = check_name(who, m, name);
    if (s == CML_OK && !child)
        s = cml__error(CML_ERR_INVALID_ARG, "%s: child \"%s\" must not be NULL", who, name);
    if (s == CML_OK && child == m) s = cml__error(CML_ERR_INVALID_ARG, "%s: a module cannot be its own child", who);
    if (s == CML_OK) s = grow((void **)&m->child_names, m->n_children, sizeof *m->child_names, who);
    if (s == CML_OK) s = grow((void **)&m->children, m->n_children, sizeof *m->children, who);
    if (s != CML_OK) {
        if (child != m) cml_module_destroy(child); /* ownership passes even on failure */
        return s;
    }
    memcpy(m->child_names[m->n_children], name, strlen(name) + 1);
    m->children[m->n_children++] = child;
    return CML_OK;
}

cml_tensor *cml_module_forward(cml_module *m, const cml_tensor *x) {
    if (!m || !m->ops || !m->ops->forward) {
        cml__error(CML_ERR_INVALID_ARG, "cml_module_forward: m must be a module with a forward function");
        return NULL;
    }
    if (!x) {
        if (cml_last_status() == CML_OK)
            cml__error(CML_ERR_INVALID_ARG, "cml_module_forward: x must not be NULL (module %s)",
                       m->ops->type ? m->ops->type : "?");
        return NULL;
    }
    return m->ops->forward(m, x);
}

void cml_module_train(cml_module *m, bool training) {
    if (!m) return;
    m->training = training;
    for (int i = 0; i < m->n_children; i++) cml_module_train(m->children[i], training);
}

/* Appends "name" (and "." when more follows) to prefix[0..len). */
static bool join(char *prefix, size_t len, const char *name, size_t *out_len) {
    size_t nl = strlen(name);
    if (len + nl >= CML_NAME_MAX) return false;
    memcpy(prefix + len, name, nl + 1);
    *out_len = len + nl;
    return true;
}

/* Depth-first walk collecting parameters (buffers = false) or buffers. */
static int collect(const cml_module *m, bool buffers, char *prefix, size_t len, cml_param *out, int cap, int count) {
    int n = buffers ? m->n_buffers : m->n_params;
    for (int i = 0; i < n; i++) {
        const char *name = buffers ? m->buffer_names[i] : m->param_names[i];
        size_t nl;
        if (!join(prefix, len, name, &nl)) {
            prefix[len] = '\0';
            cml__error(CML_ERR_INVALID_ARG, "cml_module_parameters: the name \"%s%s\" is longer than %d", prefix,
                       name, CML_NAME_MAX - 1);
            return -1;
        }
        if (count < cap) {
            memcpy(out[count].name, prefix, nl + 1);
            out[count].tensor = buffers ? m->buffers[i] : m->params[i];
        }
        count++;
    }
    for (int i = 0; i < m->n_children; i++) {
        size_t nl;
        if (!join(prefix, len, m->child_names[i], &nl) || nl + 1 >= CML_NAME_MAX) {
            prefix[len] = '\0';
            cml__error(CML_ERR_INVALID_ARG, "cml_module_parameters: the name of child \"%s%s\" is too long for %d",
                       prefix, m->child_names[i], CML_NAME_MAX - 1);
            return -1;
        }
        prefix[nl] = '.';
        prefix[nl + 1] = '\0';
        count = collect(m->children[i], buffers, prefix, nl + 1, out, cap, count);
        if (count < 0) return -1;
    }
    prefix[len] = '\0';
    return count;
}

static int enumerate(const cml_module *m, bool buffers, cml_param *out, int cap) {
    if (!m) {
        cml__error(CML_ERR_INVALID_ARG, "cml_module_parameters: m must not be NULL");
        return -1;
    }
    if (cap < 0 || (cap > 0 && !out)) {
        cml__error(CML_ERR_INVALID_ARG, "cml_module_parameters: cap=%d needs cap >= 0 and out != NULL when cap > 0", cap);
        return -1;
    }
    char prefix[CML_NAME_MAX] = "";
    return collect(m, buffers, prefix, 0, out, cap, 0);
}

int cml_module_parameters(const cml_module *m, cml_param *out, int cap) { return enumerate(m, false, out, cap); }
int cml_module_buffers(const cml_module *m, cml_param *out, int cap) { return enumerate(m, true, out, cap); }

int64_t cml_module_num_elements(const cml_module *m) {
    if (!m) return 0;
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++) n += cml_tensor_numel(m->params[i]);
    for (int i = 0; i < m->n_children; i++) n += cml_module_num_elements(m->children[i]);
    return n;
}

void cml_module_destroy(cml_module *m) {
    if (!m) return;
    if (m->ops && m->ops->destroy) m->ops->destroy(m);
    cml_tensor_release_all(m->params, m->n_params);
    cml_tensor_release_all(m->buffers, m->n_buffers);
    for (int i = 0; i < m->n_children; i++) cml_module_destroy(m->children[i]);
    free(m->params);
    free(m->param_names);
    free(m->children);
    free(m->child_names);
    free(m->buffers);
    free(m->buffer_names);
    free(m);
}

/* ---- moving to a device ---------------------------------------------------------- */

/* t takes a device copy's storage (and contiguous strides); the copy, holding the old storage, is released. */
static cml_status move_tensor(cml_tensor *t, cml_device dev) {
    if (cml_device_equal(t->storage->device, dev)) return CML_OK;
    cml_tensor *c = cml_tensor_to(t, dev);
    if (!c) return cml_last_status();
    cml_storage *st = t->storage;
    t->storage = c->storage;
    c->storage = st;
    int64_t off = t->offset;
    t->offset = c->offset;
    c->offset = off;
    for (int d = 0; d < t->ndim; d++) {
        int64_t s = t->stride[d];
        t->stride[d] = c->stride[d];
        c->stride[d] = s;
    }
    cml_tensor_release(c);
    return CML_OK;
}

static cml_status module_to(cml_module *m, cml_device dev) {
    for (int i = 0; i < m->n_params; i++) {
        CML_TRY(move_tensor(m->params[i], dev));
        if (m->params[i]->grad) CML_TRY(move_tensor(m->params[i]->grad, dev));
    }
    /* Float buffers (BatchNorm's running statistics) move; integer ones are host-side state
     * that the module reads and writes on the CPU (Dropout's generator words) and stay. */
    for (int i = 0; i < m->n_buffers; i++)
        if (cml_dtype_is_float(m->buffers[i]->dtype)) CML_TRY(move_tensor(m->buffers[i], dev));
    for (int i = 0; i < m->n_children; i++) CML_TRY(module_to(m->children[i], dev));
    return CML_OK;
}

cml_status cml_module_to(cml_module *m, cml_device dev) {
    CML_CHECK_ARG(m, "cml_module_to: m must not be NULL");
    if (!cml_ctx_default(dev)) return cml_last_status(); /* the reason the device is unusable */
    bool prev = cml_set_grad_enabled(false); /* the copies are not recorded */
    cml_status s = module_to(m, dev);
    cml_set_grad_enabled(prev);
    return s;
}
