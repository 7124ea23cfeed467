/* What the attention GPU tests (test_gpu_attention.c, test_gpu_attention_bwd90.c) share: where
 * element (b, s, h, d) of a Q/K/V/O buffer lies in each test layout, which keys a query row
 * sees, and the check that an output's padding kept its poison. */
#ifndef CML_TESTS_GPU_ATTENTION_PLACES_H
#define CML_TESTS_GPU_ATTENTION_PLACES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "camel/kernels.h"
#include "harness.h"

/* element (b, s, h, d) at b st[0] + s st[1] + h st[2] + d */
typedef struct place {
    int64_t st[3];
    int64_t n; /* elements the buffer holds */
} place;

/* The first three are layouts the Hopper path takes (TMA: 16-byte multiples); the odd one is not. */
enum { LAYOUT_BSHD, LAYOUT_BHSD, LAYOUT_BSHD_PAD8, LAYOUT_BHSD_ODD, N_LAYOUTS, N_TMA_LAYOUTS = LAYOUT_BHSD_ODD };
static const char *const LAYOUT_NAME[N_LAYOUTS] = {"bshd", "bhsd", "bshd+pad8", "bhsd+odd"};

static inline place make_place(int layout, int64_t B, int64_t S, int64_t H, int64_t D) {
    place p;
    switch (layout) {
    case LAYOUT_BSHD:
        p.st[2] = D, p.st[1] = H * D, p.st[0] = S * H * D;
        break;
    case LAYOUT_BHSD:
        p.st[1] = D, p.st[2] = S * D, p.st[0] = H * S * D;
        break;
    case LAYOUT_BSHD_PAD8: /* rows D + 8 apart, more between positions and batches: multiples of 8 when D is */
        p.st[2] = D + 8, p.st[1] = H * (D + 8) + 8, p.st[0] = S * p.st[1] + 16;
        break;
    default: /* odd strides: no vector loads */
        p.st[1] = D + 3, p.st[2] = S * (D + 3) + 1, p.st[0] = H * p.st[2] + 5;
        break;
    }
    p.n = (B - 1) * p.st[0] + (S - 1) * p.st[1] + (H - 1) * p.st[2] + D;
    return p;
}

static inline int64_t at(const place *p, int64_t b, int64_t s, int64_t h) {
    return b * p->st[0] + s * p->st[1] + h * p->st[2];
}

/* Keys query row i sees: all, or with causal masking aligned to the end (S_q != S_kv). */
static inline int64_t visible(const cml_attention_desc *d, int64_t i) {
    if (!d->causal) return d->S_kv;
    int64_t e = i + d->S_kv - d->S_q + 1;
    return e < 0 ? 0 : e > d->S_kv ? d->S_kv : e;
}

/* The bytes of a placed output buffer that are no element must still be 0xFF. */
static inline void check_gaps(const char *what, const unsigned char *buf, const place *p, size_t es, int64_t B,
                              int64_t S, int64_t H, int64_t D) {
    unsigned char *mine = calloc((size_t)p->n, 1);
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++) memset(mine + at(p, b, s, h), 1, (size_t)D);
    for (int64_t e = 0; e < p->n; e++) {
        if (mine[e]) continue;
        for (size_t k = 0; k < es; k++)
            if (buf[(size_t)e * es + k] != 0xFF) {
                CHECK_MSG(false, "%s: padding element %lld was written", what, (long long)e);
                free(mine);
                return;
            }
    }
    free(mine);
}

#endif
