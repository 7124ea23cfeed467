/* Host side of TMA: encoding tensor maps (CUtensorMap) for the bulk tensor copy
 * engine. The driver's encoder is reached through the runtime's entry-point
 * query, so the library needs no link against libcuda. */
#ifndef CML_KERNELS_CUDA_COMMON_TMA_MAP_H
#define CML_KERNELS_CUDA_COMMON_TMA_MAP_H

#include <cuda.h>
#include <stdint.h>

#include "camel/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A tiled map over a rank-D array (1 <= rank <= 5): dims[0] elements contiguous, dimension
 * i > 0 strides_bytes[i - 1] apart (multiples of 16; base 16-byte aligned). Boxes of
 * box[0] x ... x box[rank - 1] elements land in shared memory in the given swizzle;
 * out-of-range elements read as zero and are not written by stores. fn names the public
 * function for the error message. */
cml_status cml__tma_map(CUtensorMap *map, const void *base, CUtensorMapDataType dtype, int rank, const uint64_t *dims,
                        const uint64_t *strides_bytes, const uint32_t *box, CUtensorMapSwizzle swizzle,
                        const char *fn);

#ifdef __cplusplus
}
#endif
#endif
