/* CPU scaled fp8 conversions (cml_convert_scaled), the reference for the CUDA
 * kernel: every element goes through the scalar routines of camel/dtype.h
 * (round to nearest even), with the saturation and NaN rules of kernels.h
 * applied around them. amax is the NaN-propagating maximum of |x|, taken per
 * block of BLOCK elements and then over the blocks; a maximum does not depend
 * on the order, so the result is the same for any number of threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"
#include "runtime/error.h"

#define BLOCK 65536

typedef struct convert_job {
    void *y;
    const void *x;
    cml_dtype y_dtype, x_dtype;
    float scale;
    float *block_amax; /* one per block, or NULL */
} convert_job;

/* The largest finite magnitude of an fp8 dtype. */
static float fp8_max(cml_dtype dt) { return dt == CML_F8E4M3 ? 448.0f : 57344.0f; }

static uint32_t sign_bit(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u >> 31;
}

/* x * scale, a NaN product as the quiet NaN with sign(x) ^ sign(scale) (kernels.h). */
static float scaled(float x, float scale) {
    float p = x * scale;
    if (p != p) {
        uint32_t u = 0x7FC00000u | ((sign_bit(x) ^ sign_bit(scale)) << 31);
        memcpy(&p, &u, sizeof p);
    }
    return p;
}

static void convert_block(const convert_job *job, int64_t lo, int64_t hi, float *amax) {
    const bool to_fp8 = job->y_dtype == CML_F8E4M3 || job->y_dtype == CML_F8E5M2;
    const float m = to_fp8 ? fp8_max(job->y_dtype) : 0.0f;
    float a = 0.0f;
    for (int64_t i = lo; i < hi; i++) {
        const float v = cml_dtype_load(job->x, job->x_dtype, i);
        const float av = fabsf(v);
        if (av != av || a != a) a = NAN;
        else if (av > a) a = av;
        float p = scaled(v, job->scale);
        if (to_fp8) p = p > m ? m : p < -m ? -m : p; /* NaN passes (both comparisons are false) */
        cml_dtype_store(job->y, job->y_dtype, i, p);
    }
    *amax = a;
}

cml_status cml__convert_scaled_cpu(cml_ctx *ctx, void *y, cml_dtype y_dtype, const void *x, cml_dtype x_dtype,
                                   int64_t n, const float *scale, float *amax) {
    const int64_t blocks = (n + BLOCK - 1) / BLOCK;
    float *partial = NULL;
    if (amax && blocks > 0) {
        partial = malloc(sizeof(float) * (size_t)blocks);
        if (!partial)
            return cml__error(CML_ERR_OOM, "cml_convert_scaled: cannot allocate %lld block maxima", (long long)blocks);
    }
    convert_job job = {y, x, y_dtype, x_dtype, scale ? *scale : 1.0f, partial};
#pragma omp parallel for schedule(static) if (n >= CML__PARALLEL_MIN && blocks > 1)
    for (int64_t b = 0; b < blocks; b++) {
        float unused;
        const int64_t lo = b * BLOCK, hi = lo + BLOCK < n ? lo + BLOCK : n;
        convert_block(&job, lo, hi, partial ? &partial[b] : &unused);
    }
    if (amax) {
        float a = 0.0f;
        for (int64_t b = 0; b < blocks; b++) {
            if (partial[b] != partial[b] || a != a) a = NAN;
            else if (partial[b] > a) a = partial[b];
        }
        *amax = a;
    }
    free(partial);
    return CML_OK;
}
