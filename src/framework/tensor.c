/* Tensor lifetime, creation and properties. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "framework/tensor_impl.h"
#include "runtime/ctx_impl.h"
#include "runtime/cuda_backend.h"

/* ---- storage ---------------------------------------------------------------- */

/* Device memory is stream-ordered on the device's default context, the one
 * the framework queues all its work on: allocated and freed on its stream. */
static void *storage_stream(cml_device dev) {
    cml_ctx *ctx = dev.type == CML_CPU ? NULL : cml__ctx_default_existing(dev);
    return ctx ? cml_ctx_stream(ctx) : NULL;
}

static cml_storage *storage_new(size_t nbytes, cml_device dev) {
    /* Creates the default context first: it sets the error explaining why a device is unusable. */
    if (dev.type != CML_CPU && !cml_ctx_default(dev)) return NULL;
    const cml_allocator *a = cml_allocator_default(dev);
    if (!a) {
        cml_ctx_default(dev); /* sets the error explaining why the device is unusable */
        return NULL;
    }
    cml_storage *s = calloc(1, sizeof *s);
    if (!s) {
        cml__error(CML_ERR_OOM, "out of host memory allocating a tensor header");
        return NULL;
    }
    if (a->alloc(a->state, &s->data, nbytes, storage_stream(dev)) != CML_OK) {
        free(s);
        return NULL;
    }
    s->refcount = 1;
    s->nbytes = nbytes;
    s->device = dev;
    s->alloc = a;
    return s;
}

static void storage_release(cml_storage *s) {
    if (!s || --s->refcount > 0) return;
    /* After the default contexts are gone (at exit) the stream is NULL: the free then synchronizes. */
    s->alloc->free(s->alloc->state, s->data, s->nbytes, storage_stream(s->device));
    free(s);
}

/* ---- helpers --------------------------------------------------------------- */

int64_t cml__numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

void cml__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

int cml__norm_dim(int dim, int ndim) {
    if (dim < 0) dim += ndim;
    return (dim < 0 || dim >= ndim) ? -1 : dim;
}

const char *cml__shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t used = 0;
    used += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

cml_ctx *cml__ctx(const cml_tensor *t) { return cml_ctx_default(t->storage->device); }

static cml_status check_shape(const char *who, int ndim, const int64_t *shape, cml_dtype dt) {
    if (ndim < 0 || ndim > CML_MAX_DIMS)
        return cml__error(CML_ERR_SHAPE, "%s: ndim=%d must be in [0, %d]", who, ndim, CML_MAX_DIMS);
    if (ndim > 0 && !shape) return cml__error(CML_ERR_INVALID_ARG, "%s: shape must not be NULL", who);
    int64_t total = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return cml__error(CML_ERR_SHAPE, "%s: shape[%d]=%lld must be >= 0", who, i, (long long)shape[i]);
        if (shape[i] > 0 && total > INT64_MAX / 16 / shape[i])
            return cml__error(CML_ERR_SHAPE, "%s: shape is too large", who);
        total *= shape[i];
    }
    if (!cml_dtype_valid(dt)) return cml__error(CML_ERR_DTYPE, "%s: invalid dtype %d", who, (int)dt);
    return CML_OK;
}

/* who: the public function to name in errors (users reach this through
 * zeros/ones/full/from_host too). */
static cml_tensor *tensor_new(const char *who, int ndim, const int64_t *shape, cml_dtype dt, cml_device dev) {
    if (check_shape(who, ndim, shape, dt) != CML_OK) return NULL;
    cml_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        cml__error(CML_ERR_OOM, "out of host memory allocating a tensor header");
        return NULL;
    }
    int64_t n = cml__numel(ndim, shape);
    t->storage = storage_new((size_t)n * cml_dtype_size(dt), dev);
    if (!t->storage) {
        free(t);
        return NULL;
    }
    t->refcount = 1;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    cml__contiguous_strides(ndim, shape, t->stride);
    t->dtype = dt;
    return t;
}

cml_tensor *cml__tensor_new(int ndim, const int64_t *shape, cml_dtype dt, cml_device dev) {
    return tensor_new("cml_tensor_empty", ndim, shape, dt, dev);
}

cml_tensor *cml__tensor_alias(const cml_tensor *base, int ndim, const int64_t *shape,
                              const int64_t *stride, int64_t offset) {
    cml_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        cml__error(CML_ERR_OOM, "out of host memory allocating a tensor header");
        return NULL;
    }
    t->refcount = 1;
    t->storage = base->storage;
    t->storage->refcount++;
    t->offset = offset;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->stride[i] = stride[i];
    }
    t->dtype = base->dtype;
    return t;
}

/* ---- lifetime -------------------------------------------------------------------- */

cml_tensor *cml_tensor_retain(cml_tensor *t) {
    if (t) t->refcount++;
    return t;
}

void cml_tensor_release(cml_tensor *t) {
    if (!t || --t->refcount > 0) return;
    cml_node *fn = t->grad_fn;
    cml_tensor *grad = t->grad;
    storage_release(t->storage);
    free(t);
    cml_tensor_release(grad);
    cml__node_release(fn);
}

void cml_tensor_release_all(cml_tensor **ts, int n) {
    for (int i = 0; i < n; i++) {
        cml_tensor_release(ts[i]);
        ts[i] = NULL;
    }
}

/* ---- creation --------------------------------------------------------------------- */

cml_tensor *cml_tensor_empty(int ndim, const int64_t *shape, cml_dtype dt, cml_device dev) {
    return cml__tensor_new(ndim, shape, dt, dev);
}

static cml_tensor *full(const char *who, int ndim, const int64_t *shape, double value, cml_dtype dt,
                        cml_device dev) {
    cml_tensor *t = tensor_new(who, ndim, shape, dt, dev);
    if (t && cml_tensor_fill_(t, value) != CML_OK) {
        cml_tensor_release(t);
        return NULL;
    }
    return t;
}

cml_tensor *cml_tensor_full(int ndim, const int64_t *shape, double value, cml_dtype dt, cml_device dev) {
    return full("cml_tensor_full", ndim, shape, value, dt, dev);
}

cml_tensor *cml_tensor_zeros(int ndim, const int64_t *shape, cml_dtype dt, cml_device dev) {
    return full("cml_tensor_zeros", ndim, shape, 0.0, dt, dev);
}

cml_tensor *cml_tensor_ones(int ndim, const int64_t *shape, cml_dtype dt, cml_device dev) {
    return full("cml_tensor_ones", ndim, shape, 1.0, dt, dev);
}

cml_tensor *cml_tensor_scalar(double value, cml_dtype dt, cml_device dev) {
    return full("cml_tensor_scalar", 0, NULL, value, dt, dev);
}

cml_tensor *cml_tensor_arange(double start, double stop, double step, cml_dtype dt, cml_device dev) {
    if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step)) {
        cml__error(CML_ERR_INVALID_ARG, "cml_tensor_arange: step=%g must be finite and nonzero", step);
        return NULL;
    }
    double count = ceil((stop - start) / step);
    int64_t n = count > 0 ? (int64_t)count : 0;
    cml_tensor *host = cml__tensor_new(1, &n, dt, CML_DEVICE_CPU);
    if (!host) return NULL;
    for (int64_t i = 0; i < n; i++) cml_dtype_store(host->storage->data, dt, i, (float)(start + (double)i * step));
    /* Integers are written from the double directly (through float, values
     * beyond 2^24 would round), saturating like cml_dtype_store. */
    for (int64_t i = 0; i < n && (dt == CML_I64 || dt == CML_I32); i++) {
        double v = start + (double)i * step;
        if (dt == CML_I64)
            ((int64_t *)host->storage->data)[i] = v >= 0x1p63 ? INT64_MAX : v < -0x1p63 ? INT64_MIN : (int64_t)v;
        else
            ((int32_t *)host->storage->data)[i] = v >= 0x1p31 ? INT32_MAX : v < -0x1p31 ? INT32_MIN : (int32_t)v;
    }
    cml_tensor *t = cml_tensor_to(host, dev);
    cml_tensor_release(host);
    return t;
}

/* Fills a host f32 buffer, then converts to the requested dtype/device. */
static cml_tensor *from_f32_host(float *vals, int ndim, const int64_t *shape, cml_dtype dt, cml_device dev) {
    cml_tensor *f = cml_tensor_from_host(vals, ndim, shape, CML_F32, CML_DEVICE_CPU);
    free(vals);
    if (!f) return NULL;
    cml_tensor *c = cml_to_dtype(f, dt);
    cml_tensor_release(f);
    if (!c) return NULL;
    cml_tensor *t = cml_tensor_to(c, dev);
    cml_tensor_release(c);
    return t;
}

static float *random_values(const char *who, int ndim, const int64_t *shape, cml_rng *rng, cml_dtype dt,
                            int64_t *n) {
    if (!rng) {
        cml__error(CML_ERR_INVALID_ARG, "%s: rng must not be NULL", who);
        return NULL;
    }
    if (check_shape(who, ndim, shape, dt) != CML_OK) return NULL;
    if (!cml_dtype_is_float(dt)) {
        cml__error(CML_ERR_DTYPE, "%s: dtype %s must be a floating-point type", who, cml_dtype_name(dt));
        return NULL;
    }
    *n = cml__numel(ndim, shape);
    float *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
    if (!v) cml__error(CML_ERR_OOM, "%s: out of host memory", who);
    return v;
}

cml_tensor *cml_tensor_rand(int ndim, const int64_t *shape, float low, float high, cml_rng *rng,
                            cml_dtype dt, cml_device dev) {
    int64_t n = 0;
    float *v = random_values("cml_tensor_rand", ndim, shape, rng, dt, &n);
    if (!v) return NULL;
    uint64_t base = cml_rng_reserve(rng, (uint64_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = low + (high - low) * cml_u32_to_unit(cml_philox_word(rng->seed, base, (uint64_t)i));
    return from_f32_host(v, ndim, shape, dt, dev);
}

cml_tensor *cml_tensor_randn(int ndim, const int64_t *shape, float mean, float std, cml_rng *rng,
                             cml_dtype dt, cml_device dev) {
    int64_t n = 0;
    float *v = random_values("cml_tensor_randn", ndim, shape, rng, dt, &n);
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++) v[i] = mean + std * cml_rng_normal(rng);
    return from_f32_host(v, ndim, shape, dt, dev);
}

cml_tensor *cml_tensor_from_host(const void *data, int ndim, const int64_t *shape, cml_dtype dt, cml_device dev) {
    if (!data) {
        cml__error(CML_ERR_INVALID_ARG, "cml_tensor_from_host: data must not be NULL");
        return NULL;
    }
    cml_tensor *t = tensor_new("cml_tensor_from_host", ndim, shape, dt, dev);
    if (!t) return NULL;
    size_t nbytes = (size_t)cml__numel(ndim, shape) * cml_dtype_size(dt);
    if (dev.type == CML_CPU) {
        memcpy(t->storage->data, data, nbytes);
    } else if (cml__cuda_memcpy(cml__ctx(t), t->storage->data, data, nbytes, true, "cml_tensor_from_host") != CML_OK) {
        /* synchronous: the caller may reuse `data` (even pinned memory) as soon as this returns */
        cml_tensor_release(t);
        return NULL;
    }
    return t;
}

cml_status cml_tensor_to_host(const cml_tensor *t, void *data, size_t nbytes) {
    CML_CHECK_ARG(t && data, "cml_tensor_to_host: t and data must not be NULL");
    size_t need = (size_t)cml_tensor_numel(t) * cml_dtype_size(t->dtype);
    if (nbytes < need)
        return cml__error(CML_ERR_INVALID_ARG, "cml_tensor_to_host: nbytes=%zu must be >= %zu", nbytes, need);
    cml_layout dst;
    dst.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) dst.shape[i] = t->shape[i];
    cml__contiguous_strides(t->ndim, t->shape, dst.stride);
    cml_layout src = cml_tensor_layout(t);
    cml_ctx *ctx = cml__ctx(t);
    if (!ctx) return cml_last_status();
    if (t->storage->device.type == CML_CPU) return cml_copy(ctx, data, &dst, t->dtype, cml_tensor_data(t), &src, t->dtype);
    /* A device tensor: gather a non-contiguous view into a contiguous one on the device first, then one copy. */
    cml_tensor *staged = NULL;
    const void *from = cml_tensor_data(t);
    if (!cml_tensor_is_contiguous(t)) {
        staged = cml__tensor_new(t->ndim, t->shape, t->dtype, t->storage->device);
        if (!staged) return cml_last_status();
        cml_status s = cml_copy(ctx, cml_tensor_data(staged), &dst, t->dtype, from, &src, t->dtype);
        if (s != CML_OK) {
            cml_tensor_release(staged);
            return s;
        }
        from = cml_tensor_data(staged);
    }
    cml_status s = cml__cuda_memcpy(ctx, data, from, need, true, "cml_tensor_to_host");
    cml_tensor_release(staged);
    return s;
}

/* dst = src on one device, through the kernel layer (any layouts, dtype converted). */
static cml_status copy_same_device(cml_tensor *dst, const cml_tensor *src) {
    cml_ctx *ctx = cml__ctx(dst);
    if (!ctx) return cml_last_status();
    cml_layout dl = cml_tensor_layout(dst), sl = cml_tensor_layout(src);
    return cml_copy(ctx, cml_tensor_data(dst), &dl, dst->dtype, cml_tensor_data(src), &sl, src->dtype);
}

/* dst = src between devices: src's values are made contiguous on src's device
 * when they are not already, moved with one copy, and scattered into dst's
 * layout on dst's device when dst is not contiguous. A dtype conversion is done
 * on the host side when there is one (the CPU converts between every dtype),
 * else on the source device. Synchronous. */
static cml_status copy_across_devices(cml_tensor *dst, const cml_tensor *src) {
    static const char fn[] = "cml_tensor_copy_";
    cml_device sd = src->storage->device, dd = dst->storage->device;
    cml_dtype wire = dd.type == CML_CPU && sd.type != CML_CPU ? src->dtype : dst->dtype; /* the dtype moved */
    cml_tensor *staged = NULL, *landing = NULL;
    const cml_tensor *from = src;
    cml_tensor *to = dst;
    cml_status s = CML_OK;
    if (!cml_tensor_is_contiguous(src) || src->dtype != wire) {
        staged = cml__tensor_new(src->ndim, src->shape, wire, sd);
        s = staged ? copy_same_device(staged, src) : cml_last_status();
        from = staged;
    }
    if (s == CML_OK && (!cml_tensor_is_contiguous(dst) || dst->dtype != wire)) {
        landing = cml__tensor_new(dst->ndim, dst->shape, wire, dd);
        if (!landing) s = cml_last_status();
        to = landing;
    }
    size_t nbytes = (size_t)cml_tensor_numel(dst) * cml_dtype_size(wire);
    if (s == CML_OK) {
        /* The copy goes on the stream of the device side (after the work that
         * produced src, before the work that will read dst); between two GPUs
         * the source side is finished first. */
        cml_ctx *sctx = cml__ctx(from), *dctx = cml__ctx(to);
        if (!sctx || !dctx) s = cml_last_status();
        else if (sd.type != CML_CPU && dd.type != CML_CPU) s = cml_ctx_synchronize(sctx);
        if (s == CML_OK)
            s = cml__cuda_memcpy(dd.type != CML_CPU ? dctx : sctx, cml_tensor_data(to), cml_tensor_data(from), nbytes,
                                 true, fn);
    }
    if (s == CML_OK && landing) s = copy_same_device(dst, landing);
    cml_tensor_release(staged);
    cml_tensor_release(landing);
    return s;
}

cml_status cml_tensor_copy_(cml_tensor *dst, const cml_tensor *src) {
    CML_CHECK_ARG(dst && src, "cml_tensor_copy_: dst and src must not be NULL");
    char a[96], b[96];
    if (dst->ndim != src->ndim || memcmp(dst->shape, src->shape, sizeof(int64_t) * (size_t)dst->ndim) != 0)
        return cml__error(CML_ERR_SHAPE, "cml_tensor_copy_: src shape %s must equal dst shape %s",
                          cml__shape_str(src->ndim, src->shape, a, sizeof a),
                          cml__shape_str(dst->ndim, dst->shape, b, sizeof b));
    if (!cml_device_equal(dst->storage->device, src->storage->device)) return copy_across_devices(dst, src);
    return copy_same_device(dst, src);
}

cml_status cml_tensor_fill_(cml_tensor *t, double value) {
    CML_CHECK_ARG(t, "cml_tensor_fill_: t must not be NULL");
    cml_layout l = cml_tensor_layout(t);
    cml_ctx *ctx = cml__ctx(t);
    if (!ctx) return cml_last_status();
    return cml_fill(ctx, cml_tensor_data(t), &l, t->dtype, value);
}

/* ---- properties ------------------------------------------------------------------- */

int cml_tensor_ndim(const cml_tensor *t) { return t->ndim; }
const int64_t *cml_tensor_shape(const cml_tensor *t) { return t->shape; }
int64_t cml_tensor_numel(const cml_tensor *t) { return cml__numel(t->ndim, t->shape); }
cml_dtype cml_tensor_dtype(const cml_tensor *t) { return t->dtype; }
cml_device cml_tensor_device(const cml_tensor *t) { return t->storage->device; }

int64_t cml_tensor_size(const cml_tensor *t, int dim) {
    int d = cml__norm_dim(dim, t->ndim);
    return d < 0 ? -1 : t->shape[d];
}

int64_t cml_tensor_stride(const cml_tensor *t, int dim) {
    int d = cml__norm_dim(dim, t->ndim);
    return d < 0 ? 0 : t->stride[d];
}

bool cml_tensor_is_contiguous(const cml_tensor *t) {
    if (cml_tensor_numel(t) == 0) return true; /* no element to be out of place */
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != expect) return false;
        expect *= t->shape[i];
    }
    return true;
}

cml_layout cml_tensor_layout(const cml_tensor *t) {
    cml_layout l;
    memset(&l, 0, sizeof l);
    l.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) {
        l.shape[i] = t->shape[i];
        l.stride[i] = t->stride[i];
    }
    return l;
}

void *cml_tensor_data(const cml_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)cml_dtype_size(t->dtype);
}

double cml_tensor_item_at(const cml_tensor *t, const int64_t *index) {
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) off += index[i] * t->stride[i];
    const void *base = cml_tensor_data(t);
    unsigned char elem[8];
    if (t->storage->device.type != CML_CPU) { /* fetch the one element (synchronizes the device's stream) */
        size_t es = cml_dtype_size(t->dtype);
        cml_ctx *ctx = cml__ctx(t);
        if (!ctx || cml__cuda_memcpy(ctx, elem, (const char *)base + off * (int64_t)es, es, true,
                                     "cml_tensor_item") != CML_OK)
            return NAN;
        base = elem;
        off = 0;
    }
    switch (t->dtype) {
    case CML_I64: return (double)((const int64_t *)base)[off];
    case CML_I32: return (double)((const int32_t *)base)[off];
    default: return (double)cml_dtype_load(base, t->dtype, off);
    }
}

double cml_tensor_item(const cml_tensor *t) {
    if (cml__any_null("cml_tensor_item", 1, &t)) return NAN;
    if (cml_tensor_numel(t) != 1) {
        cml__error(CML_ERR_SHAPE, "cml_tensor_item: the tensor must have exactly one element");
        return NAN;
    }
    int64_t zeros[CML_MAX_DIMS] = {0};
    return cml_tensor_item_at(t, zeros);
}

const char *cml_tensor_describe(const cml_tensor *t, char *buf, size_t n) {
    char shape[160];
    snprintf(buf, n, "%s%s", cml_dtype_name(t->dtype), cml__shape_str(t->ndim, t->shape, shape, sizeof shape));
    return buf;
}

/* ---- argument checks shared by ops --------------------------------------------- */

bool cml__any_null(const char *who, int n, const cml_tensor *const *ts) {
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            if (cml_last_status() == CML_OK)
                cml__error(CML_ERR_INVALID_ARG, "%s: input %d is NULL", who, i);
            return true;
        }
    }
    return false;
}

cml_status cml__check_same_device(const char *who, const cml_tensor *a, const cml_tensor *b) {
    if (!cml_device_equal(a->storage->device, b->storage->device))
        return cml__error(CML_ERR_INVALID_ARG, "%s: tensors are on different devices (%s and %s)", who,
                          cml_device_name(a->storage->device), cml_device_name(b->storage->device));
    return CML_OK;
}

cml_status cml__check_float(const char *who, const char *arg, const cml_tensor *t) {
    if (!cml_dtype_is_float(t->dtype))
        return cml__error(CML_ERR_DTYPE, "%s: %s has dtype %s; expected a floating-point dtype", who, arg,
                          cml_dtype_name(t->dtype));
    return CML_OK;
}
