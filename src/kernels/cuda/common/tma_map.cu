/* TMA tensor-map encoding (see tma_map.h). */
#include <cuda_runtime.h>
#include <stdio.h>

#include "kernels/cuda/common/tma_map.h"
#include "runtime/error.h"

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The driver's cuTensorMapEncodeTiled, looked up once (a benign race: every thread stores the same pointer). */
static encode_tiled_fn encoder(const char *fn, cml_status *st) {
    static encode_tiled_fn cached;
    if (cached) return cached;
    void *p = NULL;
    cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p) {
        *st = cml__error(CML_ERR_CUDA, "%s: the driver has no cuTensorMapEncodeTiled (%s); a CUDA 12+ driver is needed",
                         fn, cudaGetErrorString(e));
        return NULL;
    }
    cached = (encode_tiled_fn)p;
    return cached;
}

extern "C" cml_status cml__tma_map(CUtensorMap *map, const void *base, CUtensorMapDataType dtype, int rank,
                                   const uint64_t *dims, const uint64_t *strides_bytes, const uint32_t *box,
                                   CUtensorMapSwizzle swizzle, const char *fn) {
    if (rank < 1 || rank > 5) return cml__error(CML_ERR_INTERNAL, "%s: a tensor map of rank %d (1..5)", fn, rank);
    cml_status st = CML_OK;
    encode_tiled_fn encode = encoder(fn, &st);
    if (!encode) return st;
    cuuint64_t gdim[5], gstride[4];
    cuuint32_t bdim[5], estride[5];
    for (int i = 0; i < rank; i++) {
        gdim[i] = dims[i];
        bdim[i] = box[i];
        estride[i] = 1;
        if (i > 0) gstride[i - 1] = strides_bytes[i - 1];
    }
    CUresult r = encode(map, dtype, (cuuint32_t)rank, (void *)base, gdim, gstride, bdim, estride,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r == CUDA_SUCCESS) return CML_OK;
    char shape[256];
    int n = 0;
    for (int i = 0; i < rank && n < (int)sizeof shape; i++)
        n += snprintf(shape + n, sizeof shape - (size_t)n, "%sdim %llu box %u%s", i ? ", " : "",
                      (unsigned long long)dims[i], box[i], i ? "" : " (contiguous)");
    for (int i = 1; i < rank && n < (int)sizeof shape; i++)
        n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%llu", i == 1 ? "; strides in bytes " : " ",
                      (unsigned long long)strides_bytes[i - 1]);
    return cml__error(CML_ERR_CUDA, "%s: cuTensorMapEncodeTiled failed (CUresult %d) for a rank-%d map: %s", fn, (int)r,
                      rank, shape);
}
