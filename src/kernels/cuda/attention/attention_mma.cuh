/* mma.sync m16n8k16 building blocks for the tensor-core attention kernels
 * (attention_fwd_mma.cu, attention_bwd_mma.cu): f16/bf16 operands, f32
 * accumulators, sm_80 and later.
 *
 * Fragments (PTX ISA, "Matrix fragments for mma.m16n8k16"), g = lane / 4, c = lane % 4:
 *   A (16 x 16, row-major) a[0] = (row g, cols 2c, 2c+1), a[1] = (row g+8, cols 2c, 2c+1),
 *                          a[2] = (row g, cols 2c+8, 2c+9), a[3] = (row g+8, cols 2c+8, 2c+9);
 *   B (16 x 8, "col")      b[0] = (k 2c, 2c+1; n g), b[1] = (k 2c+8, 2c+9; n g);
 *   C (16 x 8, f32)        c[0], c[1] = (row g, cols 2c, 2c+1), c[2], c[3] = (row g+8, same cols).
 * So the accumulators of two neighbouring n-tiles, packed in pairs, are exactly
 * the A fragment of the next product (P V, dS K, ...), without shared memory.
 * Tiles live in shared memory as rows of 16-bit elements with a row pitch of
 * LD elements (16-byte aligned rows; see cml__attn_load_b16). */
#ifndef CML_KERNELS_CUDA_ATTENTION_ATTENTION_MMA_CUH
#define CML_KERNELS_CUDA_ATTENTION_ATTENTION_MMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "camel/dtype.h"

static __device__ __forceinline__ uint32_t cml__smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Four 8x8 matrices; lane l gives the address of row l % 8 of matrix l / 8. */
static __device__ __forceinline__ void cml__ldmatrix_x4(uint32_t (&r)[4], const uint16_t *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(cml__smem_addr(p)));
}

/* The same, each matrix transposed (a thread gets a column pair instead of a row pair). */
static __device__ __forceinline__ void cml__ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(cml__smem_addr(p)));
}

/* d += A B for one m16n8k16 tile. */
template <int DT>
static __device__ __forceinline__ void cml__mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                      uint32_t b1) {
    if constexpr (DT == CML_BF16) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

/* Two floats as a 16-bit pair (lo in the low half), round to nearest even. */
template <int DT> static __device__ __forceinline__ uint32_t cml__pack2(float lo, float hi) {
    if constexpr (DT == CML_BF16) {
        __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *(uint32_t *)&v;
    } else {
        __half2 v = __floats2half2_rn(lo, hi);
        return *(uint32_t *)&v;
    }
}

/* The A fragment (16 rows x 16 k) made of accumulator n-tiles t0 (k 0..7) and t1 (k 8..15). */
template <int DT>
static __device__ __forceinline__ void cml__acc_to_a(uint32_t (&a)[4], const float (&t0)[4], const float (&t1)[4]) {
    a[0] = cml__pack2<DT>(t0[0], t0[1]);
    a[1] = cml__pack2<DT>(t0[2], t0[3]);
    a[2] = cml__pack2<DT>(t1[0], t1[1]);
    a[3] = cml__pack2<DT>(t1[2], t1[3]);
}

/* A fragment of rows r0 .. r0+15, cols k0 .. k0+15 of a row-major tile. */
template <int LD>
static __device__ __forceinline__ void cml__load_a(uint32_t (&a)[4], const uint16_t *tile, int r0, int k0, int lane) {
    cml__ldmatrix_x4(a, tile + (r0 + lane % 16) * LD + k0 + (lane / 16) * 8);
}

/* B fragments of two n-tiles (rows n0 .. n0+7 and n0+8 .. n0+15 of the tile are the n
 * index, cols k0 .. k0+15 the k index: B = tile^T): b[0], b[1] for n-tile n0, b[2], b[3]
 * for n0 + 8. */
template <int LD>
static __device__ __forceinline__ void cml__load_bt(uint32_t (&b)[4], const uint16_t *tile, int n0, int k0, int lane) {
    cml__ldmatrix_x4(b, tile + (n0 + lane % 8 + (lane / 16) * 8) * LD + k0 + ((lane / 8) % 2) * 8);
}

/* B fragments of two n-tiles where the tile's rows are the k index (k0 .. k0+15)
 * and its cols the n index (n0 .. n0+7, n0+8 .. n0+15): B = tile, via ldmatrix.trans. */
template <int LD>
static __device__ __forceinline__ void cml__load_bn(uint32_t (&b)[4], const uint16_t *tile, int k0, int n0, int lane) {
    cml__ldmatrix_x4_trans(b, tile + (k0 + lane % 8 + ((lane / 8) % 2) * 8) * LD + n0 + (lane / 16) * 8);
}

/* N accumulator n-tiles to zero. */
template <int N> static __device__ __forceinline__ void cml__mma_zero(float (&acc)[N][4]) {
#pragma unroll
    for (int n = 0; n < N; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}

/* acc (16 rows x N n-tiles) += A times rows k0 .. k0+15, cols n0 .. n0 + 8N - 1 of a tile
 * (O += P V, dQ += dS K). */
template <int DT, int LD, int N>
static __device__ __forceinline__ void cml__mma_bn(float (&acc)[N][4], const uint32_t (&a)[4], const uint16_t *tile,
                                                   int k0, int n0, int lane) {
#pragma unroll
    for (int n = 0; n < N; n += 2) {
        uint32_t b[4];
        cml__load_bn<LD>(b, tile, k0, n0 + n * 8, lane);
        cml__mma_16816<DT>(acc[n], a, b[0], b[1]);
        cml__mma_16816<DT>(acc[n + 1], a, b[2], b[3]);
    }
}

#endif
