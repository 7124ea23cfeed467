/* CPU dropout: mask[i] = uniform(word i of Philox stream (seed, offset)) >= p,
 * y = x * mask / (1 - p).
 *
 * Word i is word i % 4 of block offset + i / 4 (see cml_philox_word), so the
 * loop draws whole blocks with cml_philox4x32 — one block per 4 elements
 * instead of one per element — using the same key/counter layout; the test
 * checks every mask bit against cml_philox_word. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"

#define CHUNK 1024 /* a multiple of 4: chunks start on block boundaries */

cml_status cml__dropout_fwd_cpu(cml_ctx *ctx, void *y, uint8_t *mask, const void *x, int64_t n,
                                cml_dtype dtype, float p, uint64_t seed, uint64_t offset) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const float scale = 1.0f / (1.0f - p);
    int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n >= CML__PARALLEL_MIN)
    for (int64_t c = 0; c < chunks; c++) {
        float xbuf[CHUNK], ybuf[CHUNK];
        uint8_t keep[CHUNK];
        int64_t i0 = c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
        for (int64_t j = 0; j < len; j += 4) {
            uint64_t block = offset + (uint64_t)(i0 + j) / 4;
            const uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
            uint32_t words[4];
            cml_philox4x32(words, counter, key);
            for (int w = 0; w < 4 && j + w < len; w++) keep[j + w] = cml_u32_to_unit(words[w]) >= p;
        }
        const float *xv = cml__f32_view(xbuf, x, dtype, i0, 1, len);
        float *yv = dtype == CML_F32 ? (float *)y + i0 : ybuf;
        for (int64_t j = 0; j < len; j++) yv[j] = keep[j] ? xv[j] * scale : 0.0f;
        if (yv == ybuf) cml__store_f32(y, dtype, i0, 1, yv, len);
        if (mask)
            for (int64_t j = 0; j < len; j++) mask[i0 + j] = keep[j];
    }
    return CML_OK;
}
