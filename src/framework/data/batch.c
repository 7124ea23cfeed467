/* Mini-batch index iterator: a permutation of [0, n) per epoch, cut into batches.
 *
 * With shuffle, each epoch's permutation is a Fisher-Yates shuffle of the
 * identity drawn from one Philox stream seeded at creation; the stream goes
 * on across epochs, so every epoch differs while the whole sequence of
 * epochs is reproducible from the seed. */
#include <stdlib.h>

#include "camel/data.h"
#include "runtime/error.h"

struct cml_batch_iter {
    int64_t n, batch;
    bool shuffle, drop_last;
    cml_rng rng;
    int64_t *perm;       /* (n) this epoch's order */
    int64_t pos;         /* next position in perm */
    cml_tensor *current; /* the batch handed out last (owned; released on the next call) */
};

/* Uniform in [0, bound) for any bound >= 1: cml_rng_below when it fits in 32
 * bits, else 64-bit rejection sampling. */
static uint64_t below64(cml_rng *rng, uint64_t bound) {
    if (bound <= UINT32_MAX) return cml_rng_below(rng, (uint32_t)bound);
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound; /* accept x < limit */
    for (;;) {
        uint64_t hi = cml_rng_u32(rng); /* two statements: a fixed draw order */
        uint64_t x = hi << 32 | cml_rng_u32(rng);
        if (x < limit) return x % bound;
    }
}

static void start_epoch(cml_batch_iter *it) {
    it->pos = 0;
    for (int64_t i = 0; i < it->n; i++) it->perm[i] = i;
    if (!it->shuffle) return;
    for (int64_t i = it->n - 1; i > 0; i--) {
        int64_t j = (int64_t)below64(&it->rng, (uint64_t)i + 1);
        int64_t tmp = it->perm[i];
        it->perm[i] = it->perm[j];
        it->perm[j] = tmp;
    }
}

cml_batch_iter *cml_batch_iter_create(int64_t n, int64_t batch, bool shuffle, bool drop_last, uint64_t seed) {
    if (n < 0 || batch < 1) {
        cml__error(CML_ERR_INVALID_ARG, "cml_batch_iter_create: n=%lld must be >= 0 and batch=%lld >= 1",
                   (long long)n, (long long)batch);
        return NULL;
    }
    if ((uint64_t)n > SIZE_MAX / sizeof(int64_t)) {
        cml__error(CML_ERR_INVALID_ARG, "cml_batch_iter_create: n=%lld is too large", (long long)n);
        return NULL;
    }
    cml_batch_iter *it = calloc(1, sizeof *it);
    int64_t *perm = malloc(n > 0 ? (size_t)n * sizeof(int64_t) : 1);
    if (!it || !perm) {
        free(it);
        free(perm);
        cml__error(CML_ERR_OOM, "cml_batch_iter_create: out of memory for %lld indices", (long long)n);
        return NULL;
    }
    it->n = n;
    it->batch = batch;
    it->shuffle = shuffle;
    it->drop_last = drop_last;
    it->perm = perm;
    cml_rng_init(&it->rng, seed);
    start_epoch(it);
    return it;
}

void cml_batch_iter_reset(cml_batch_iter *it) {
    if (it) start_epoch(it);
}

int64_t cml_batch_iter_batches(const cml_batch_iter *it) {
    if (!it) return 0;
    return it->drop_last ? it->n / it->batch : it->n / it->batch + (it->n % it->batch != 0);
}

/* Returns NULL at the end of the epoch, and also when the index tensor cannot
 * be allocated (then cml_last_status() != CML_OK). */
const cml_tensor *cml_batch_iter_next(cml_batch_iter *it) {
    if (!it) return NULL;
    cml_tensor_release(it->current);
    it->current = NULL;
    int64_t left = it->n - it->pos;
    if (left <= 0 || (it->drop_last && left < it->batch)) return NULL;
    int64_t len = left < it->batch ? left : it->batch;
    it->current = cml_tensor_from_host(it->perm + it->pos, 1, &len, CML_I64, CML_DEVICE_CPU);
    if (!it->current) return NULL;
    it->pos += len;
    return it->current;
}

void cml_batch_iter_destroy(cml_batch_iter *it) {
    if (!it) return;
    cml_tensor_release(it->current);
    free(it->perm);
    free(it);
}
