/* Training checkpoints: a directory with model.safetensors (parameters, buffers,
 * the caller's metadata) and state.safetensors (training step, RNG, optimizer).
 *
 * state.safetensors entries:
 *   "step"                       i64, 0-d: the caller's training step
 *   "rng.seed", "rng.offset"     i64, 0-d (the u64 bits): the cml_rng, when one was given
 *   cml_optim_state's entries    "lr", "steps", "step.<p>", "momentum_buffer.<p>",
 *                                "exp_avg.<p>", "exp_avg_sq.<p>", when an optimizer was given
 * and metadata "camel.optimizer" (cml_optim_name). Both files carry the same
 * random "camel.save_id": save writes both temporary files completely, then
 * renames state first and model last, and load rejects a pair whose ids differ
 * (a save interrupted between the two renames), so a reader never mixes two saves.
 * Loads check everything (names, dtypes, shapes, counter values) before copying
 * anything, so a rejected checkpoint leaves the model and optimizer untouched. */
#define _POSIX_C_SOURCE 200809L /* mkdir, getpid */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "framework/io/io_impl.h"
#include "framework/tensor_impl.h"

#define MODEL_FILE "model.safetensors"
#define STATE_FILE "state.safetensors"
#define KEY_SAVE_ID "camel.save_id"
#define KEY_OPTIM "camel.optimizer"
#define RESERVED_PREFIX "camel."

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) {
        cml__error(CML_ERR_OOM, "out of memory for the path \"%s/%s\"", dir, name);
        return NULL;
    }
    memcpy(p, dir, a);
    size_t k = a;
    if (a == 0 || dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

/* The module's parameters then buffers, in a new array the caller frees. */
static cml_status model_entries(const char *who, const cml_module *m, cml_param **out, int *n) {
    *out = NULL;
    int np = cml_module_parameters(m, NULL, 0), nb = np >= 0 ? cml_module_buffers(m, NULL, 0) : -1;
    if (np < 0 || nb < 0) return cml_last_status();
    cml_param *p = malloc((size_t)(np + nb > 0 ? np + nb : 1) * sizeof *p);
    if (!p) return cml__error(CML_ERR_OOM, "%s: out of memory", who);
    if (cml_module_parameters(m, p, np) != np || cml_module_buffers(m, p + np, nb) != nb) {
        free(p);
        return cml_last_status() != CML_OK ? cml_last_status() : cml__error(CML_ERR_INTERNAL, "%s: module changed", who);
    }
    *out = p;
    *n = np + nb;
    return CML_OK;
}

static cml_status optim_entries(const char *who, const cml_optim *opt, cml_param **out, int *n) {
    *out = NULL;
    *n = 0;
    if (!opt) return CML_OK;
    int k = cml_optim_state(opt, NULL, 0);
    if (k < 0) return cml_last_status();
    cml_param *p = malloc((size_t)(k > 0 ? k : 1) * sizeof *p);
    if (!p) return cml__error(CML_ERR_OOM, "%s: out of memory", who);
    if (cml_optim_state(opt, p, k) != k) {
        free(p);
        return cml_last_status();
    }
    *out = p;
    *n = k;
    return CML_OK;
}

/* A fresh id for one save (not cryptographic: it only has to differ between saves). */
static void make_save_id(char *buf, size_t n) {
    static uint64_t counter;
    uint64_t x = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)clock() << 20 ^ (uint64_t)getpid() << 40 ^
                 ++counter ^ (uint64_t)(uintptr_t)buf;
    uint64_t y = x;
    for (int i = 0; i < 2; i++) { /* splitmix64 */
        y += 0x9E3779B97F4A7C15ull;
        y = (y ^ (y >> 30)) * 0xBF58476D1CE4E5B9ull;
        y = (y ^ (y >> 27)) * 0x94D049BB133111EBull;
        y ^= y >> 31;
    }
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    snprintf(buf, n, "%016" PRIx64 "-%09ld", y, (long)ts.tv_nsec);
}

static cml_status ensure_dir(const char *who, const char *dir) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return cml__error(CML_ERR_IO, "%s: cannot create the directory \"%s\": %s", who, dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0)
        return cml__error(CML_ERR_IO, "%s: cannot stat \"%s\": %s", who, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return cml__error(CML_ERR_IO, "%s: \"%s\" exists and is not a directory", who, dir);
    return CML_OK;
}

static cml_tensor *i64_scalar(uint64_t bits) {
    cml_tensor *t = cml_tensor_zeros(0, NULL, CML_I64, CML_DEVICE_CPU);
    if (t) memcpy(cml_tensor_data(t), &bits, sizeof bits);
    return t;
}

/* Writes both files to temporary names, then renames state, then model. */
static cml_status save_files(const char *who, const char *dir, const cml_named_tensor *model, int n_model,
                             const char *const *mkeys, const char *const *mvals, int n_mkeys,
                             const cml_named_tensor *state, int n_state, const char *const *skeys,
                             const char *const *svals, int n_skeys) {
    char *mpath = join(dir, MODEL_FILE), *spath = join(dir, STATE_FILE);
    cml__atomic_file sf = {0}, mf = {0};
    cml_status s = mpath && spath ? CML_OK : CML_ERR_OOM;
    bool s_open = false, m_open = false;
    if (s == CML_OK) s = cml__atomic_begin(&sf, who, spath);
    s_open = s == CML_OK;
    if (s == CML_OK) s = cml__safetensors_write(&sf, who, state, n_state, skeys, svals, n_skeys);
    if (s == CML_OK) s = cml__atomic_finish(&sf);
    if (s == CML_OK) s = cml__atomic_begin(&mf, who, mpath);
    m_open = s == CML_OK;
    if (s == CML_OK) s = cml__safetensors_write(&mf, who, model, n_model, mkeys, mvals, n_mkeys);
    if (s == CML_OK) s = cml__atomic_finish(&mf);
    if (s == CML_OK) s = cml__atomic_commit(&sf);
    if (s == CML_OK) s = cml__atomic_commit(&mf);
    if (s_open) cml__atomic_abort(&sf);
    if (m_open) cml__atomic_abort(&mf);
    free(mpath);
    free(spath);
    return s;
}

cml_status cml_checkpoint_save(const char *dir, const cml_module *model, const cml_optim *opt, const cml_rng *rng,
                               int64_t step, cml_checkpoint_meta meta) {
    const char *who = "cml_checkpoint_save";
    CML_CHECK_ARG(dir && dir[0], "%s: dir must not be NULL or empty", who);
    CML_CHECK_ARG(model, "%s: model must not be NULL", who);
    CML_CHECK_ARG(meta.n >= 0 && (meta.n == 0 || (meta.keys && meta.values)),
                  "%s: meta.n=%d must be >= 0, with keys and values not NULL when > 0", who, meta.n);
    for (int i = 0; i < meta.n; i++)
        CML_CHECK_ARG(meta.keys[i] && strncmp(meta.keys[i], RESERVED_PREFIX, strlen(RESERVED_PREFIX)) != 0,
                      "%s: metadata key %d (\"%s\") is NULL or starts with the reserved prefix \"" RESERVED_PREFIX "\"",
                      who, i, meta.keys[i] ? meta.keys[i] : "(null)");

    cml_param *mp = NULL, *op = NULL;
    int n_model = 0, n_opt = 0;
    cml_status s = model_entries(who, model, &mp, &n_model);
    if (s == CML_OK) s = optim_entries(who, opt, &op, &n_opt);
    int n_state = 1 + (rng ? 2 : 0) + n_opt;
    cml_named_tensor *mt = malloc((size_t)(n_model > 0 ? n_model : 1) * sizeof *mt);
    cml_named_tensor *st = malloc((size_t)n_state * sizeof *st);
    const char **mkeys = malloc((size_t)(meta.n + 1) * sizeof *mkeys);
    const char **mvals = malloc((size_t)(meta.n + 1) * sizeof *mvals);
    cml_tensor *scalars[3] = {NULL, NULL, NULL};
    if (s == CML_OK && (!mt || !st || !mkeys || !mvals)) s = cml__error(CML_ERR_OOM, "%s: out of memory", who);
    if (s == CML_OK) {
        scalars[0] = i64_scalar((uint64_t)step);
        if (rng) scalars[1] = i64_scalar(rng->seed);
        if (rng) scalars[2] = i64_scalar(rng->offset);
        if (!scalars[0] || (rng && (!scalars[1] || !scalars[2]))) s = cml_last_status();
    }
    if (s == CML_OK) {
        char id[64];
        make_save_id(id, sizeof id);
        for (int i = 0; i < n_model; i++) mt[i] = (cml_named_tensor){mp[i].name, mp[i].tensor};
        int k = 0;
        st[k++] = (cml_named_tensor){"step", scalars[0]};
        if (rng) {
            st[k++] = (cml_named_tensor){"rng.seed", scalars[1]};
            st[k++] = (cml_named_tensor){"rng.offset", scalars[2]};
        }
        for (int i = 0; i < n_opt; i++) st[k++] = (cml_named_tensor){op[i].name, op[i].tensor};
        for (int i = 0; i < meta.n; i++) {
            mkeys[i] = meta.keys[i];
            mvals[i] = meta.values[i];
        }
        mkeys[meta.n] = KEY_SAVE_ID;
        mvals[meta.n] = id;
        const char *skeys[2] = {KEY_SAVE_ID, KEY_OPTIM}, *svals[2] = {id, opt ? cml_optim_name(opt) : ""};
        s = ensure_dir(who, dir);
        if (s == CML_OK)
            s = save_files(who, dir, mt, n_model, mkeys, mvals, meta.n + 1, st, n_state, skeys, svals, opt ? 2 : 1);
    }
    cml_tensor_release_all(scalars, 3);
    free(mp);
    free(op);
    free(mt);
    free(st);
    free(mkeys);
    free(mvals);
    return s;
}

/* ---- loading ----------------------------------------------------------------------------- */

typedef struct loader {
    const char *who;
    const char *path; /* the file, for messages */
    const cml_safetensors *f;
} loader;

/* Checks that the file has `name` with t's dtype and shape (what: "parameter", "optimizer state"). */
static cml_status check_entry(const loader *l, const char *what, const char *name, const cml_tensor *t,
                              const void **data) {
    cml_dtype dt;
    int ndim;
    const int64_t *shape;
    size_t nbytes;
    *data = cml__safetensors_entry(l->f, name, &dt, &ndim, &shape, &nbytes);
    char a[160], b[160];
    if (!*data)
        return cml__error(CML_ERR_CORRUPT, "%s: \"%s\" has no %s \"%s\" (expected %s %s)", l->who, l->path, what, name,
                          cml_dtype_name(t->dtype), cml__shape_str(t->ndim, t->shape, a, sizeof a));
    if (dt != t->dtype || ndim != t->ndim || memcmp(shape, t->shape, (size_t)ndim * sizeof *shape) != 0)
        return cml__error(CML_ERR_CORRUPT, "%s: \"%s\": %s \"%s\" is %s %s in the file but %s %s here", l->who,
                          l->path, what, name, cml_dtype_name(dt), cml__shape_str(ndim, shape, a, sizeof a),
                          cml_dtype_name(t->dtype), cml__shape_str(t->ndim, t->shape, b, sizeof b));
    return CML_OK;
}

/* A 0-d i64 entry's value (CML_ERR_CORRUPT when missing or not 0-d i64). */
static cml_status read_i64(const loader *l, const char *name, uint64_t *out) {
    cml_dtype dt;
    int ndim;
    const int64_t *shape;
    size_t nbytes;
    const void *d = cml__safetensors_entry(l->f, name, &dt, &ndim, &shape, &nbytes);
    if (!d) return cml__error(CML_ERR_CORRUPT, "%s: \"%s\" has no entry \"%s\"", l->who, l->path, name);
    if (dt != CML_I64 || ndim != 0)
        return cml__error(CML_ERR_CORRUPT, "%s: \"%s\": \"%s\" must be a 0-d I64 tensor", l->who, l->path, name);
    memcpy(out, d, sizeof *out);
    return CML_OK;
}

static bool has_entry(const cml_safetensors *f, const char *name) {
    cml_dtype dt;
    int ndim;
    const int64_t *shape;
    size_t nbytes;
    return cml__safetensors_entry(f, name, &dt, &ndim, &shape, &nbytes) != NULL;
}

/* The first file entry not among the n expected names (for "unexpected entry" messages). */
static const char *first_extra(const cml_safetensors *f, const cml_param *expected, int n, const char *const *also,
                               int n_also) {
    for (int i = 0; i < cml_safetensors_count(f); i++) {
        const char *name = cml_safetensors_name(f, i);
        bool found = false;
        for (int j = 0; j < n && !found; j++) found = strcmp(name, expected[j].name) == 0;
        for (int j = 0; j < n_also && !found; j++) found = strcmp(name, also[j]) == 0;
        if (!found) return name;
    }
    return "?";
}

/* Copies raw bytes (the tensor's dtype and shape, row-major) into t. */
static cml_status copy_in(cml_tensor *t, const void *data) {
    size_t nbytes = (size_t)cml_tensor_numel(t) * cml_dtype_size(t->dtype);
    if (t->storage->device.type == CML_CPU && cml_tensor_is_contiguous(t)) {
        if (nbytes) memcpy(cml_tensor_data(t), data, nbytes);
        return CML_OK;
    }
    cml_tensor *tmp = cml_tensor_from_host(data, t->ndim, t->shape, t->dtype, t->storage->device);
    cml_status s = tmp ? cml_tensor_copy_(t, tmp) : cml_last_status();
    cml_tensor_release(tmp);
    return s;
}

/* Validates every model entry (and that the file has nothing else); fills data[i]. */
static cml_status check_model(const loader *l, const cml_param *mp, int n, const void **data) {
    for (int i = 0; i < n; i++) CML_TRY(check_entry(l, "parameter or buffer", mp[i].name, mp[i].tensor, &data[i]));
    if (cml_safetensors_count(l->f) != n)
        return cml__error(CML_ERR_CORRUPT, "%s: \"%s\" has an entry \"%s\" that the model does not have (the file "
                                           "holds %d tensors, the model %d)", l->who, l->path,
                          first_extra(l->f, mp, n, NULL, 0), cml_safetensors_count(l->f), n);
    return CML_OK;
}

static cml_status check_state(const loader *l, const cml_optim *opt, const cml_param *op, int n, const void **data,
                              bool want_rng) {
    uint64_t v = 0;
    CML_TRY(read_i64(l, "step", &v));
    bool has_rng = has_entry(l->f, "rng.seed");
    if (want_rng) {
        if (!has_rng)
            return cml__error(CML_ERR_CORRUPT, "%s: \"%s\" has no RNG state (\"rng.seed\"): it was saved without an rng",
                              l->who, l->path);
        CML_TRY(read_i64(l, "rng.seed", &v));
        CML_TRY(read_i64(l, "rng.offset", &v));
    }
    if (!opt) return CML_OK;
    const char *saved = cml_safetensors_meta(l->f, KEY_OPTIM);
    if (!saved || !saved[0])
        return cml__error(CML_ERR_CORRUPT, "%s: \"%s\" has no optimizer state: it was saved without an optimizer",
                          l->who, l->path);
    if (strcmp(saved, cml_optim_name(opt)) != 0)
        return cml__error(CML_ERR_CORRUPT, "%s: \"%s\" holds %s state, but the optimizer is %s", l->who, l->path, saved,
                          cml_optim_name(opt));
    for (int i = 0; i < n; i++) {
        CML_TRY(check_entry(l, "optimizer state", op[i].name, op[i].tensor, &data[i]));
        if (op[i].tensor->dtype == CML_I64) {
            int64_t c;
            memcpy(&c, data[i], sizeof c);
            if (c < 0)
                return cml__error(CML_ERR_CORRUPT, "%s: \"%s\": the counter \"%s\" is %" PRId64 " (must be >= 0)",
                                  l->who, l->path, op[i].name, c);
        } else if (strcmp(op[i].name, "lr") == 0) {
            float lr;
            memcpy(&lr, data[i], sizeof lr);
            if (!(isfinite(lr) && lr >= 0.0f))
                return cml__error(CML_ERR_CORRUPT, "%s: \"%s\": lr=%g must be finite and >= 0", l->who, l->path,
                                  (double)lr);
        }
    }
    static const char *const fixed[3] = {"step", "rng.seed", "rng.offset"};
    int expected = n + 1 + (has_rng ? 2 : 0);
    if (cml_safetensors_count(l->f) != expected)
        return cml__error(CML_ERR_CORRUPT, "%s: \"%s\" has an entry \"%s\" that the %s optimizer does not have", l->who,
                          l->path, first_extra(l->f, op, n, fixed, 3), cml_optim_name(opt));
    return CML_OK;
}

typedef struct load_job {
    cml_safetensors *model_f, *state_f;
    char *model_path, *state_path;
    cml_param *mp, *op;
    int n_model, n_opt;
    const void **mdata, **odata;
} load_job;

static cml_status load_checked(const char *who, const char *dir, load_job *j, cml_module *model, cml_optim *opt,
                               cml_rng *rng, int64_t *step) {
    bool need_state = opt || rng || step;
    j->model_path = join(dir, MODEL_FILE);
    j->state_path = join(dir, STATE_FILE);
    if (!j->model_path || !j->state_path) return cml_last_status();
    CML_TRY(model_entries(who, model, &j->mp, &j->n_model));
    CML_TRY(optim_entries(who, opt, &j->op, &j->n_opt));
    j->mdata = calloc((size_t)j->n_model + 1, sizeof *j->mdata);
    j->odata = calloc((size_t)j->n_opt + 1, sizeof *j->odata);
    if (!j->mdata || !j->odata) return cml__error(CML_ERR_OOM, "%s: out of memory", who);
    CML_TRY(cml_safetensors_open(j->model_path, &j->model_f));
    if (need_state) {
        CML_TRY(cml_safetensors_open(j->state_path, &j->state_f));
        const char *a = cml_safetensors_meta(j->model_f, KEY_SAVE_ID), *b = cml_safetensors_meta(j->state_f, KEY_SAVE_ID);
        if (!a || !b || strcmp(a, b) != 0)
            return cml__error(CML_ERR_CORRUPT, "%s: \"%s\": %s and %s come from different saves (save ids %s and %s; "
                                               "was a save interrupted?)", who, dir, MODEL_FILE, STATE_FILE,
                              a ? a : "missing", b ? b : "missing");
    }
    loader ml = {who, j->model_path, j->model_f}, sl = {who, j->state_path, j->state_f};
    CML_TRY(check_model(&ml, j->mp, j->n_model, j->mdata));
    if (need_state) CML_TRY(check_state(&sl, opt, j->op, j->n_opt, j->odata, rng != NULL));
    /* Everything is valid: copy in. */
    for (int i = 0; i < j->n_model; i++) CML_TRY(copy_in(j->mp[i].tensor, j->mdata[i]));
    for (int i = 0; i < j->n_opt; i++) CML_TRY(copy_in(j->op[i].tensor, j->odata[i]));
    uint64_t v = 0;
    if (rng) {
        CML_TRY(read_i64(&sl, "rng.seed", &rng->seed));
        CML_TRY(read_i64(&sl, "rng.offset", &rng->offset));
    }
    if (step) {
        CML_TRY(read_i64(&sl, "step", &v));
        *step = (int64_t)v;
    }
    return CML_OK;
}

cml_status cml_checkpoint_load(const char *dir, cml_module *model, cml_optim *opt, cml_rng *rng, int64_t *step) {
    const char *who = "cml_checkpoint_load";
    CML_CHECK_ARG(dir && dir[0], "%s: dir must not be NULL or empty", who);
    CML_CHECK_ARG(model, "%s: model must not be NULL", who);
    load_job j;
    memset(&j, 0, sizeof j);
    cml_status s = load_checked(who, dir, &j, model, opt, rng, step);
    cml_safetensors_close(j.model_f);
    cml_safetensors_close(j.state_f);
    free(j.model_path);
    free(j.state_path);
    free(j.mp);
    free(j.op);
    free(j.mdata);
    free(j.odata);
    return s;
}

cml_status cml_checkpoint_open_model(const char *dir, cml_safetensors **out) {
    CML_CHECK_ARG(out, "cml_checkpoint_open_model: out must not be NULL");
    *out = NULL;
    CML_CHECK_ARG(dir && dir[0], "cml_checkpoint_open_model: dir must not be NULL or empty");
    char *path = join(dir, MODEL_FILE);
    if (!path) return cml_last_status();
    cml_status s = cml_safetensors_open(path, out);
    free(path);
    return s;
}
