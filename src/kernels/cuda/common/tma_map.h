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

/* A tiled map over a 3-D array: dims[0] elements contiguous, dims[1] rows
 * strides_bytes[0] apart, dims[2] matrices strides_bytes[1] apart (both multiples
 * of 16; base 16-byte aligned). Boxes of box[0] x box[1] x box[2] elements land in
 * shared memory in the given swizzle; out-of-range elements read as zero.
 * fn names the public function for the error message. */
cml_status cml__tma_map_3d(CUtensorMap *map, const void *base, CUtensorMapDataType dtype, const uint64_t dims[3],
                           const uint64_t strides_bytes[2], const uint32_t box[3], CUtensorMapSwizzle swizzle,
                           const char *fn);

#ifdef __cplusplus
}
#endif
#endif
