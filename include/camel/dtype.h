/* Element types, their sizes and scalar conversions (round-to-nearest-even). */
#ifndef CAMEL_DTYPE_H
#define CAMEL_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cml_dtype {
    CML_F32 = 0,
    CML_F16,
    CML_BF16,
    CML_F8E4M3,  /* OCP e4m3fn: no infinities, max 448; overflow saturates to +-448 */
    CML_F8E5M2,  /* OCP e5m2: IEEE-like with infinities; overflow rounds to +-inf */
    CML_I32,
    CML_I64,
    CML_U8,
    CML_DTYPE_COUNT
} cml_dtype;

size_t cml_dtype_size(cml_dtype dt);          /* bytes per element; 0 for an invalid dtype */
const char *cml_dtype_name(cml_dtype dt);     /* "f32", "bf16", ... ; "?" for an invalid dtype */
bool cml_dtype_is_float(cml_dtype dt);        /* f32, f16, bf16, f8e4m3, f8e5m2 */
bool cml_dtype_valid(cml_dtype dt);

/* Scalar conversions. f32 -> narrow formats round to nearest, ties to even;
 * NaN stays NaN. */
uint16_t cml_f32_to_f16(float x);
float    cml_f16_to_f32(uint16_t h);
uint16_t cml_f32_to_bf16(float x);
float    cml_bf16_to_f32(uint16_t h);
uint8_t  cml_f32_to_f8e4m3(float x);
float    cml_f8e4m3_to_f32(uint8_t v);
uint8_t  cml_f32_to_f8e5m2(float x);
float    cml_f8e5m2_to_f32(uint8_t v);

/* Reads element i of a buffer of dtype dt as float / writes a float into it
 * (stores into integer dtypes round to nearest, ties to even, then saturate to the
 * type's range; NaN stores as 0). */
float cml_dtype_load(const void *base, cml_dtype dt, int64_t i);
void  cml_dtype_store(void *base, cml_dtype dt, int64_t i, float v);

/* Converts n elements from one dtype to another (contiguous buffers on the host). */
void cml_dtype_convert(void *dst, cml_dtype dst_dt, const void *src, cml_dtype src_dt, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
