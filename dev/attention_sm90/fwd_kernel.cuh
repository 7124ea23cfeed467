/* DRAFT, NOT YET RUN ON A GPU: first step of the Hopper flash-attention forward (issue 6).
 * bf16 Q, K, V, O; head dim D = 64 or 128; any strides (multiples of 16 bytes); causal
 * (bottom-right) or not; GQA (H_q a multiple of H_kv); any sequence lengths.
 *
 * One CTA per (128-query tile, batch x query head); 3 warpgroups:
 *   producer (setmaxnreg 24): one thread loads the Q tile once, then K and V tiles of BN = 128
 *     keys into a 2-stage ring (TMA, 128-byte swizzle, 4-D maps over (D, H, S, B)).
 *   consumers 1, 2 (setmaxnreg 240): 64 query rows each; per key tile S = Q K^T (wgmma, both
 *     operands in shared memory, K-major), online softmax in registers with exp2 and the scale
 *     folded in, then O += P V with P taken from registers (the S accumulator layout is the
 *     wgmma A-fragment layout) and V N-major in shared memory.
 * Whole key tiles past the causal diagonal are skipped by position; the diagonal tiles are
 * masked by position. No data-dependent branches: constant time per shape.
 * Not yet: ping-pong between consumers, overlap of softmax with the next QK^T, TMA store,
 * backward, varlen. Built only by dev/attention_sm90/harness.cu. */
#ifndef CML_DEV_ATTENTION_SM90_FWD_KERNEL_CUH
#define CML_DEV_ATTENTION_SM90_FWD_KERNEL_CUH

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/common/hopper.cuh"
#include "kernels/cuda/common/wgmma_ops.cuh"

#define ATT_BM 128 /* query rows per CTA: two consumers of 64 */
#define ATT_BN 128 /* keys per tile */
#define ATT_STAGES 2
#define ATT_THREADS 384

typedef struct att_params {
    int B, Hq, Hkv, Sq, Sk;
    int causal;
    float scale_log2;               /* softmax scale * log2(e) */
    __nv_bfloat16 *O;               /* (B, Sq, Hq, D) through the strides below, in elements */
    long long o_sb, o_ss, o_sh;
    float *lse;                     /* (B, Hq, Sq), natural log; may be NULL */
} att_params;

/* Shared memory: Q tile, then K and V stages (each D/64 column blocks of rows x 128 bytes). */
template <int D>
struct att_smem {
    enum {
        q_bytes = ATT_BM * D * 2,
        kv_bytes = ATT_BN * D * 2,
        total = 1024 + q_bytes + 2 * ATT_STAGES * kv_bytes + 8 * (1 + 3 * ATT_STAGES)
    };
};

/* Loads a rows x D tile at (s0, h, b) of a 4-D map (D, H, S, B) as D/64 column blocks. */
template <int D>
static __device__ __forceinline__ void att_load_tile(uint8_t *dst, const CUtensorMap *map, uint64_t *bar, int s0, int h,
                                                     int b, int rows) {
#pragma unroll
    for (int c = 0; c < D / 64; c++) {
        asm volatile(
            "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];" ::
                "r"(cml__smem_addr(dst + c * rows * 128)),
            "l"((uint64_t)map), "r"(cml__smem_addr(bar)), "r"(c * 64), "r"(h), "r"(s0), "r"(b)
            : "memory");
    }
}

static __device__ __forceinline__ uint32_t att_pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

template <int D>
static __global__ void __launch_bounds__(ATT_THREADS, 1)
    att_fwd_sm90_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                        const __grid_constant__ CUtensorMap map_v, const __grid_constant__ att_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef att_smem<D> sm;
    extern __shared__ uint8_t att_smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)att_smem_raw + 1023) & ~(uintptr_t)1023);
    uint8_t *sq = smem;
    uint8_t *sk = sq + sm::q_bytes;
    uint8_t *sv = sk + ATT_STAGES * sm::kv_bytes;
    uint64_t *q_full = (uint64_t *)(sv + ATT_STAGES * sm::kv_bytes);
    uint64_t *k_full = q_full + 1, *v_full = k_full + ATT_STAGES, *kv_empty = v_full + ATT_STAGES;

    const int q0 = blockIdx.x * ATT_BM;
    const int bh = blockIdx.y, b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hkv);
    /* keys this tile can see: all, or up to the causal diagonal of its last row (bottom-right) */
    const int off = p.Sk - p.Sq;
    int k_end = p.Sk;
    if (p.causal) k_end = min(p.Sk, max(0, q0 + ATT_BM - 1 + off + 1));
    const int n_tiles = (k_end + ATT_BN - 1) / ATT_BN;

    if (threadIdx.x == 0) {
        cml__mbar_init(q_full, 1);
        for (int s = 0; s < ATT_STAGES; s++) {
            cml__mbar_init(&k_full[s], 1);
            cml__mbar_init(&v_full[s], 1);
            cml__mbar_init(&kv_empty[s], 2);
        }
        cml__mbar_init_fence();
    }
    __syncthreads();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        cml__regs_dealloc<24>();
        if (threadIdx.x == 0) {
            cml__mbar_arrive_expect_tx(q_full, sm::q_bytes);
            att_load_tile<D>(sq, &map_q, q_full, q0, h, b, ATT_BM);
            for (int j = 0; j < n_tiles; j++) {
                const int s = j % ATT_STAGES, round = j / ATT_STAGES;
                if (round > 0) cml__mbar_wait(&kv_empty[s], (round - 1) & 1);
                cml__mbar_arrive_expect_tx(&k_full[s], sm::kv_bytes);
                att_load_tile<D>(sk + s * sm::kv_bytes, &map_k, &k_full[s], j * ATT_BN, hk, b, ATT_BN);
                cml__mbar_arrive_expect_tx(&v_full[s], sm::kv_bytes);
                att_load_tile<D>(sv + s * sm::kv_bytes, &map_v, &v_full[s], j * ATT_BN, hk, b, ATT_BN);
            }
        }
        return;
    }
    cml__regs_alloc<240>();
    const int consumer = wg - 1, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    const bool leader = threadIdx.x % 128 == 0;
    /* this thread's two query rows (fragment rows lane/4 and lane/4 + 8 of its warp's 16) */
    const int row_a = q0 + consumer * 64 + 16 * warp + lane / 4, row_b = row_a + 8;
    float o[D / 2];
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
#pragma unroll
    for (int i = 0; i < D / 2; i++) o[i] = 0.0f;

    cml__mbar_wait(q_full, 0);
    const uint32_t q_addr = cml__smem_addr(sq) + consumer * 64 * 128; /* this consumer's 64 rows in each block */
    for (int j = 0; j < n_tiles; j++) {
        const int s = j % ATT_STAGES, parity = (j / ATT_STAGES) & 1;
        float sc[ATT_BN / 2];
        cml__mbar_wait(&k_full[s], parity);
        const uint32_t k_addr = cml__smem_addr(sk + s * sm::kv_bytes);
        cml__wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) { /* 16 of D per wgmma: +32 bytes in a block, blocks 64 wide */
            const uint32_t in_block = (kk % 4) * 32;
            uint64_t dq = cml__wgmma_desc(q_addr + (kk / 4) * ATT_BM * 128 + in_block, 16, 1024);
            uint64_t dk = cml__wgmma_desc(k_addr + (kk / 4) * ATT_BN * 128 + in_block, 16, 1024);
            cml__wgmma_m64n128k16_bf16<0, 0>(sc, dq, dk, kk > 0);
        }
        cml__wgmma_commit();
        cml__wgmma_wait<0>();
        cml__wgmma_reg_fence<ATT_BN / 2>(sc);

        /* mask by position: keys past Sk, and (causal) past the row's diagonal */
        const int key0 = j * ATT_BN + 2 * (lane % 4);
        float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
        for (int q = 0; q < ATT_BN / 8; q++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int key = key0 + 8 * q + e;
                const bool ok_a = key < p.Sk && (!p.causal || key <= row_a + off);
                const bool ok_b = key < p.Sk && (!p.causal || key <= row_b + off);
                float va = ok_a ? sc[4 * q + e] * p.scale_log2 : -INFINITY;
                float vb = ok_b ? sc[4 * q + 2 + e] * p.scale_log2 : -INFINITY;
                sc[4 * q + e] = va;
                sc[4 * q + 2 + e] = vb;
                mx_a = fmaxf(mx_a, va);
                mx_b = fmaxf(mx_b, vb);
            }
        }
        /* the 4 threads of a quad hold one row's 32 columns each */
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
        const float new_a = fmaxf(m_a, mx_a), new_b = fmaxf(m_b, mx_b);
        /* a row with no visible key so far keeps base 0: exp2(-inf - 0) = 0, never -inf - -inf */
        const float base_a = new_a == -INFINITY ? 0.0f : new_a, base_b = new_b == -INFINITY ? 0.0f : new_b;
        const float corr_a = exp2f(m_a - base_a), corr_b = exp2f(m_b - base_b);
        m_a = new_a;
        m_b = new_b;
        float sum_a = 0.0f, sum_b = 0.0f;
        uint32_t pa[ATT_BN / 4]; /* P as bf16 pairs: the A fragments of ATT_BN / 16 wgmmas */
#pragma unroll
        for (int q = 0; q < ATT_BN / 8; q++) {
            const float p0 = exp2f(sc[4 * q] - base_a), p1 = exp2f(sc[4 * q + 1] - base_a);
            const float p2 = exp2f(sc[4 * q + 2] - base_b), p3 = exp2f(sc[4 * q + 3] - base_b);
            sum_a += p0 + p1;
            sum_b += p2 + p3;
            pa[2 * q] = att_pack_bf16(p0, p1);     /* row a, columns 8q + 2(lane%4) + {0,1} */
            pa[2 * q + 1] = att_pack_bf16(p2, p3); /* row b, the same columns */
        }
        sum_a += __shfl_xor_sync(0xffffffffu, sum_a, 1);
        sum_a += __shfl_xor_sync(0xffffffffu, sum_a, 2);
        sum_b += __shfl_xor_sync(0xffffffffu, sum_b, 1);
        sum_b += __shfl_xor_sync(0xffffffffu, sum_b, 2);
        l_a = l_a * corr_a + sum_a;
        l_b = l_b * corr_b + sum_b;
#pragma unroll
        for (int q = 0; q < D / 8; q++) {
            o[4 * q] *= corr_a;
            o[4 * q + 1] *= corr_a;
            o[4 * q + 2] *= corr_b;
            o[4 * q + 3] *= corr_b;
        }

        /* O += P V: 16 keys per wgmma; V N-major: +16 rows (2048 bytes) per step, blocks of D/64 */
        cml__mbar_wait(&v_full[s], parity);
        const uint32_t v_addr = cml__smem_addr(sv + s * sm::kv_bytes);
        cml__wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < ATT_BN / 16; kk++) {
            /* A fragment of keys 16kk..16kk+15: (row a, cols c, c+1), (row b, c, c+1), (row a, c+8, c+9), (row b, c+8, c+9) */
            const uint32_t a[4] = {pa[4 * kk], pa[4 * kk + 1], pa[4 * kk + 2], pa[4 * kk + 3]};
            uint64_t dv = cml__wgmma_desc(v_addr + kk * 16 * 128, ATT_BN * 128, 1024);
            if (D == 128) cml__wgmma_m64n128k16_bf16_rs<1>(o, a, dv, 1);
            else cml__wgmma_m64n64k16_bf16_rs<1>(o, a, dv, 1);
        }
        cml__wgmma_commit();
        cml__wgmma_wait<0>();
        cml__wgmma_reg_fence<D / 2>(o);
        if (leader) cml__mbar_arrive(&kv_empty[s]);
    }

    /* O / l, stored bf16 where the row exists; l = 0 (no visible key) gives O = 0, lse = -inf */
    const float inv_a = l_a > 0.0f ? 1.0f / l_a : 0.0f, inv_b = l_b > 0.0f ? 1.0f / l_b : 0.0f;
    const int col0 = 2 * (lane % 4);
#pragma unroll
    for (int q = 0; q < D / 8; q++) {
        const int d = 8 * q + col0;
        if (row_a < p.Sq)
            *(uint32_t *)(p.O + b * p.o_sb + (long long)row_a * p.o_ss + h * p.o_sh + d) =
                att_pack_bf16(o[4 * q] * inv_a, o[4 * q + 1] * inv_a);
        if (row_b < p.Sq)
            *(uint32_t *)(p.O + b * p.o_sb + (long long)row_b * p.o_ss + h * p.o_sh + d) =
                att_pack_bf16(o[4 * q + 2] * inv_b, o[4 * q + 3] * inv_b);
    }
    if (p.lse && lane % 4 == 0) {
        const float ln2 = 0.6931471805599453f;
        float *lse = p.lse + ((long long)b * p.Hq + h) * p.Sq;
        if (row_a < p.Sq) lse[row_a] = l_a > 0.0f ? (m_a + log2f(l_a)) * ln2 : -INFINITY;
        if (row_b < p.Sq) lse[row_b] = l_b > 0.0f ? (m_b + log2f(l_b)) * ln2 : -INFINITY;
    }
#endif
}

#endif
