/* TMA tensor-map encoding (see tma_map.h). */
#include <cuda_runtime.h>

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

extern "C" cml_status cml__tma_map_3d(CUtensorMap *map, const void *base, CUtensorMapDataType dtype,
                                      const uint64_t dims[3], const uint64_t strides_bytes[2], const uint32_t box[3],
                                      CUtensorMapSwizzle swizzle, const char *fn) {
    cml_status st = CML_OK;
    encode_tiled_fn encode = encoder(fn, &st);
    if (!encode) return st;
    cuuint64_t gdim[3] = {dims[0], dims[1], dims[2]};
    cuuint64_t gstride[2] = {strides_bytes[0], strides_bytes[1]};
    cuuint32_t bdim[3] = {box[0], box[1], box[2]};
    cuuint32_t estride[3] = {1, 1, 1};
    CUresult r = encode(map, dtype, 3, (void *)base, gdim, gstride, bdim, estride, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return cml__error(CML_ERR_CUDA,
                          "%s: cuTensorMapEncodeTiled failed (CUresult %d) for dims %llu x %llu x %llu, strides %llu, "
                          "%llu bytes, box %u x %u x %u",
                          fn, (int)r, (unsigned long long)dims[0], (unsigned long long)dims[1],
                          (unsigned long long)dims[2], (unsigned long long)strides_bytes[0],
                          (unsigned long long)strides_bytes[1], box[0], box[1], box[2]);
    return CML_OK;
}
