/* The Hopper (sm_90a) flash-attention forward kernel (issue 6): 16-bit Q, K, V, O (bf16 or
 * f16), head dim D = 64, 128 or 256, any strides TMA accepts (16-byte multiples, 16-byte
 * aligned bases), causal (bottom-right) or not, GQA, any sequence lengths.
 *
 * One CTA per (128-query tile, batch x query head), 3 warpgroups:
 *   producer (setmaxnreg 24): one thread loads the Q tile once, then K and V tiles of BN keys
 *     into a ring of STAGES stages (TMA, 128-byte swizzle, 4-D maps over (D, H, S, B)); K and
 *     V have their own full/empty barriers, so S = Q K^T can start before V lands.
 *   consumers 0, 1 (setmaxnreg 240): 64 query rows each; S = Q K^T by wgmma (both operands in
 *     shared memory, K-major), online softmax in registers (exp2 with the scale folded into one
 *     FFMA, the row sum kept per thread and reduced once at the end), O += P V with P from
 *     registers (the S accumulator layout is the wgmma A-fragment layout), V N-major.
 *   (The persistent kernel below generalizes this to NC consumers: 192-row tiles, 3 consumers at D = 64.)
 * Variants (template flags; dev/attention_sm90/README.md has their measurements):
 *   INTRA    (FlashAttention-3's intra-warpgroup overlap) issue S_j = Q K_j and O += P_{j-1} V_{j-1}
 *            back to back, then do the softmax of S_j while the P V product runs;
 *   PINGPONG named barriers make the two consumers take turns issuing their GEMMs, so one's
 *            softmax runs under the other's GEMMs;
 *   HALF     (without INTRA, BN = 128) a consumer whose rows see none of the last key tile's second half
 *            (the causal diagonal: consumer 0 of every 128-row tile; a full tile of <= 64 valid keys) runs
 *            that tile's S and P V at 64 keys, in registers of their own (with sc / pa, ptxas serialized the
 *            wgmmas: C7511);
 *   TSTORE   the epilogue writes O (16-bit) into the consumer's rows of the Q buffer in the
 *            128-byte swizzle and stores it with one TMA store per 64 columns (rows past S_q
 *            are clipped by the map); otherwise direct 4-byte stores from registers.
 * Whole key tiles past the causal diagonal are skipped by position; tiles that cross the diagonal
 * or the end of the keys are masked by position. No data-dependent branches: constant time per
 * shape. Every accumulation has a fixed order: bitwise reproducible. */
#ifndef CML_KERNELS_CUDA_ATTENTION_ATTENTION_FWD_SM90_CUH
#define CML_KERNELS_CUDA_ATTENTION_ATTENTION_FWD_SM90_CUH

#include <stdint.h>

#include "kernels/cuda/common/hopper.cuh"
#include "kernels/cuda/common/wgmma_ops.cuh"

#define CML_ATT90_BM 128 /* query rows of a 2-consumer tile (D = 128 / 256; D = 64: 64 x NC = 192) */
#define CML_ATT90_THREADS 384
#define CML_ATT90_PRODUCER_REGS 24
#define CML_ATT90_CONSUMER_REGS 240

enum { CML_ATT90_BF16 = 0, CML_ATT90_F16 = 1 };

typedef struct cml__att90_params {
    int Hq, group, Sq, Sk, causal;
    int q_tiles;      /* ceil(Sq / BM); blockIdx.x = bh * q_tiles + tile */
    float scale_log2; /* softmax scale * log2(e) */
    float *lse;       /* (B, Hq, Sq), natural log; may be NULL */
    void *O;          /* direct-store epilogue only: element (b, s, h, d) at b o_sb + s o_ss + h o_sh + d */
    long long o_sb, o_ss, o_sh;
    int total_tiles;  /* persistent kernel: q_tiles * B * Hq */
    int *tile_counter; /* persistent kernel: zero before the launch; tiles past gridDim.x are taken from it */
    int head_group;    /* causal: > 0 orders the work tiles longest first across groups of this many (batch,
                          head) pairs (cml__att90_group_order; the one-tile kernel: GROUPED = 1 only); 0: head
                          by head */
    int q_shift;       /* persistent kernel with QSHIFT (D = 64, causal): query tile k covers rows
                          [k BM - q_shift, (k + 1) BM - q_shift) clipped to [0, S_q), so the partial tile is the
                          first one; 64 or 128 (attention_fwd_sm90.cu decides); 0 with QSHIFT = false */
} cml__att90_params;

/* Host side, shared by the forward and backward launchers (attention_fwd_sm90.cu): the 4-D map
 * (D, H, S, B) over one of Q, K, V, O, dO (boxes of 64 elements of D x 1 head x rows positions x
 * 1 batch, 128-byte swizzle; positions past S read as zeros and are not written), and TMA's rules
 * for one such tensor (strides in elements positive multiples of 8 below 2^39 wherever the
 * dimension has more than one entry; the base 16-byte aligned and not NULL). fn names the caller
 * in errors. */
extern "C" cml_status cml__att90_map(CUtensorMap *map, const void *base, int dtype, int64_t B, int64_t S, int64_t H,
                                     int64_t D, const int64_t st[3], int rows, const char *fn);
extern "C" bool cml__att90_tensor_ok(const void *ptr, const int64_t st[3], int64_t B, int64_t S, int64_t H);

/* Dynamic shared memory: 1024 bytes of alignment slack, the Q tile, K and V stages (each D/64
 * column blocks of rows x 128 bytes), the barriers. */
template <int D, int BN, int STAGES>
struct cml__att90_smem {
    enum {
        q_bytes = CML_ATT90_BM * D * 2,
        kv_bytes = BN * D * 2,
        total = 1024 + q_bytes + 2 * STAGES * kv_bytes + 8 * (1 + 4 * STAGES)
    };
};

/* S (64 x N) = Q K^T, 16 of D per call, both K-major in shared memory. */
template <int DT, int N>
static __device__ __forceinline__ void cml__att90_mma_ss(float *d, uint64_t da, uint64_t db, int acc) {
    if (DT == CML_ATT90_BF16) {
        if (N == 64) cml__wgmma_m64n64k16_bf16<0, 0>(d, da, db, acc);
        else if (N == 80) cml__wgmma_m64n80k16_bf16<0, 0>(d, da, db, acc);
        else if (N == 96) cml__wgmma_m64n96k16_bf16<0, 0>(d, da, db, acc);
        else if (N == 128) cml__wgmma_m64n128k16_bf16<0, 0>(d, da, db, acc);
        else if (N == 176) cml__wgmma_m64n176k16_bf16<0, 0>(d, da, db, acc);
        else if (N == 192) cml__wgmma_m64n192k16_bf16<0, 0>(d, da, db, acc);
        else cml__wgmma_m64n256k16_bf16<0, 0>(d, da, db, acc);
    } else {
        if (N == 64) cml__wgmma_m64n64k16_f16<0, 0>(d, da, db, acc);
        else if (N == 80) cml__wgmma_m64n80k16_f16<0, 0>(d, da, db, acc);
        else if (N == 96) cml__wgmma_m64n96k16_f16<0, 0>(d, da, db, acc);
        else if (N == 128) cml__wgmma_m64n128k16_f16<0, 0>(d, da, db, acc);
        else if (N == 176) cml__wgmma_m64n176k16_f16<0, 0>(d, da, db, acc);
        else if (N == 192) cml__wgmma_m64n192k16_f16<0, 0>(d, da, db, acc);
        else cml__wgmma_m64n256k16_f16<0, 0>(d, da, db, acc);
    }
}

/* O (64 x N) += P V, 16 keys per call: P from registers, V N-major in shared memory. */
template <int DT, int N>
static __device__ __forceinline__ void cml__att90_mma_rs(float *d, const uint32_t *a, uint64_t db) {
    if (DT == CML_ATT90_BF16) {
        if (N == 64) cml__wgmma_m64n64k16_bf16_rs<1>(d, a, db, 1);
        else if (N == 128) cml__wgmma_m64n128k16_bf16_rs<1>(d, a, db, 1);
        else cml__wgmma_m64n256k16_bf16_rs<1>(d, a, db, 1);
    } else {
        if (N == 64) cml__wgmma_m64n64k16_f16_rs<1>(d, a, db, 1);
        else if (N == 128) cml__wgmma_m64n128k16_f16_rs<1>(d, a, db, 1);
        else cml__wgmma_m64n256k16_f16_rs<1>(d, a, db, 1);
    }
}

/* Two floats as one register of 16-bit values: lo in the low half. */
template <int DT>
static __device__ __forceinline__ uint32_t cml__att90_pack(float lo, float hi) {
    uint32_t r;
    if (DT == CML_ATT90_BF16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

static __device__ __forceinline__ float cml__att90_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

static __device__ __forceinline__ void cml__att90_bar_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
static __device__ __forceinline__ void cml__att90_bar_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

template <int COUNT>
static __device__ __forceinline__ void cml__att90_keep(uint32_t *r) {
#pragma unroll
    for (int i = 0; i < COUNT; i++) asm volatile("" : "+r"(r[i])::"memory");
}

/* Loads a rows x D tile at sequence position s0 of head h, batch b as D/64 column blocks. */
template <int D>
static __device__ __forceinline__ void cml__att90_load(uint8_t *dst, const CUtensorMap *map, uint64_t *bar, int s0,
                                                       int h, int b, int rows) {
#pragma unroll
    for (int c = 0; c < D / 64; c++) cml__tma_load_4d(dst + c * rows * 128, map, bar, c * 64, h, s0, b);
}

/* S = Q K^T for this consumer: q_addr its 64 rows of column block 0 (blocks of BM rows), k_addr the stage. */
template <int DT, int D, int BN, int BM = CML_ATT90_BM, int N = BN> /* N: keys computed (the first N of BN) */
static __device__ __forceinline__ void cml__att90_qk(float *sc, uint32_t q_addr, uint32_t k_addr) {
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) { /* 16 of D per wgmma: +32 bytes in a 128-byte row, blocks of 64 */
        const uint32_t in_block = (kk % 4) * 32;
        const uint64_t dq = cml__wgmma_desc(q_addr + (kk / 4) * BM * 128 + in_block, 16, 1024);
        const uint64_t dk = cml__wgmma_desc(k_addr + (kk / 4) * BN * 128 + in_block, 16, 1024);
        cml__att90_mma_ss<DT, N>(sc, dq, dk, kk > 0);
    }
}

/* O += P V: 16 keys per wgmma; V N-major: +16 rows (2048 bytes) per step, column blocks BN * 128 apart. */
template <int DT, int D, int BN, int N = BN> /* N: keys used (the first N of the stage's BN) */
static __device__ __forceinline__ void cml__att90_pv(float *o, const uint32_t *pa, uint32_t v_addr) {
#pragma unroll
    for (int kk = 0; kk < N / 16; kk++) {
        /* A fragment of keys 16kk..16kk+15: (row a, c..c+1), (row b, c..c+1), (row a, c+8..), (row b, c+8..) */
        const uint32_t a[4] = {pa[4 * kk], pa[4 * kk + 1], pa[4 * kk + 2], pa[4 * kk + 3]};
        const uint64_t dv = cml__wgmma_desc(v_addr + kk * 16 * 128, BN * 128, 1024);
        cml__att90_mma_rs<DT, D>(o, a, dv);
    }
}

/* Online softmax of one S tile (accumulator layout: register 4q + 2r + e is row r (a or b),
 * key 8q + 2 (lane % 4) + e). Masks keys at or past end[r] when mask is set; updates the row
 * maxima m (raw scores), the per-thread partial sums l, and corr (the factor for O); leaves P
 * (f32) in sc. */
template <int BN>
static __device__ __forceinline__ void cml__att90_softmax(float *sc, float *m, float *l, float *corr, bool mask,
                                                          int key0, const int *end, float scale_log2) {
    const float ninf = __int_as_float(0xff800000);
    if (mask) {
#pragma unroll
        for (int q = 0; q < BN / 8; q++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int key = key0 + 8 * q + e;
                if (key >= end[0]) sc[4 * q + e] = ninf;
                if (key >= end[1]) sc[4 * q + 2 + e] = ninf;
            }
    }
    float mx[2][2] = {{ninf, ninf}, {ninf, ninf}}; /* two chains per row */
#pragma unroll
    for (int q = 0; q < BN / 8; q++) {
        mx[0][q & 1] = fmaxf(mx[0][q & 1], fmaxf(sc[4 * q], sc[4 * q + 1]));
        mx[1][q & 1] = fmaxf(mx[1][q & 1], fmaxf(sc[4 * q + 2], sc[4 * q + 3]));
    }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float v = fmaxf(mx[r][0], mx[r][1]);
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
        const float m_new = fmaxf(m[r], v);
        /* a row with no visible key so far keeps base 0: exp2(-inf - 0) = 0, never -inf - -inf */
        base[r] = m_new == ninf ? 0.0f : m_new * scale_log2;
        corr[r] = cml__att90_ex2(m[r] * scale_log2 - base[r]);
        m[r] = m_new;
    }
    float sum[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
#pragma unroll
    for (int q = 0; q < BN / 8; q++)
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float pv = cml__att90_ex2(fmaf(sc[4 * q + 2 * r + e], scale_log2, -base[r]));
                sc[4 * q + 2 * r + e] = pv;
                sum[r][e] += pv;
            }
#pragma unroll
    for (int r = 0; r < 2; r++) l[r] = l[r] * corr[r] + (sum[r][0] + sum[r][1]);
}

template <int DT, int BN>
static __device__ __forceinline__ void cml__att90_to_p(uint32_t *pa, const float *sc) {
#pragma unroll
    for (int q = 0; q < BN / 8; q++) {
        pa[2 * q] = cml__att90_pack<DT>(sc[4 * q], sc[4 * q + 1]);         /* row a */
        pa[2 * q + 1] = cml__att90_pack<DT>(sc[4 * q + 2], sc[4 * q + 3]); /* row b */
    }
}

template <int D>
static __device__ __forceinline__ void cml__att90_rescale(float *o, const float *corr) {
#pragma unroll
    for (int q = 0; q < D / 8; q++) {
        o[4 * q] *= corr[0];
        o[4 * q + 1] *= corr[0];
        o[4 * q + 2] *= corr[1];
        o[4 * q + 3] *= corr[1];
    }
}

/* One key tile of the loop without intra-warpgroup overlap: S = Q K^T (its issue in this consumer's ping-pong
 * turn), the online softmax, O += P V; N: the tile's first N keys only (HALF: a last tile whose other keys no
 * row of the consumer sees). */
template <int DT, int D, int BN, int N, int STAGES, int PINGPONG>
static __device__ __forceinline__ void cml__att90_step(float *o, float *sc, uint32_t *pa, float *m, float *l,
                                                       float *corr, uint32_t q_addr, uint8_t *sk, uint8_t *sv,
                                                       uint64_t *k_full, uint64_t *v_full, uint64_t *k_empty,
                                                       uint64_t *v_empty, int j, int consumer, bool leader, bool mask,
                                                       int key0, const int *end, float scale_log2) {
    const int s = j % STAGES, parity = (j / STAGES) & 1, kv_bytes = BN * D * 2;
    cml__mbar_wait(&k_full[s], parity);
    if (PINGPONG) cml__att90_bar_sync(1 + consumer, 256);
    cml__wgmma_fence();
    cml__att90_qk<DT, D, BN, CML_ATT90_BM, N>(sc, q_addr, cml__smem_addr(sk + s * kv_bytes));
    cml__wgmma_commit();
    if (PINGPONG) cml__att90_bar_arrive(2 - consumer, 256);
    cml__wgmma_wait<0>();
    cml__wgmma_reg_fence<N / 2>(sc);
    if (leader) cml__mbar_arrive(&k_empty[s]);
    cml__att90_softmax<N>(sc, m, l, corr, mask, key0, end, scale_log2);
    cml__att90_to_p<DT, N>(pa, sc);
    cml__att90_rescale<D>(o, corr);
    cml__mbar_wait(&v_full[s], parity);
    cml__wgmma_fence();
    cml__att90_pv<DT, D, BN, N>(o, pa, cml__smem_addr(sv + s * kv_bytes));
    cml__wgmma_commit();
    cml__wgmma_wait<0>();
    cml__wgmma_reg_fence<D / 2>(o);
    cml__att90_keep<N / 4>(pa);
    if (leader) cml__mbar_arrive(&v_empty[s]);
}

/* The causal work order across heads (p.causal, p.head_group > 0): groups of head_group (batch, head)
 * pairs, one after the other (their K / V stay in L2 while the group runs); inside a group the longest
 * query tile of every pair, then the next longest: the CTAs that claim the last tiles of the launch get
 * the shortest ones, so the tail is short. Work tile -> (query tile counted from the longest, pair). */
static __device__ __forceinline__ void cml__att90_group_order(const cml__att90_params &p, int tile, int &t_lin, int &bh) {
    const int per_group = p.head_group * p.q_tiles, g = tile / per_group, rem = tile - g * per_group;
    const int pairs = min(p.head_group, p.total_tiles / p.q_tiles - g * p.head_group);
    t_lin = rem / pairs;
    bh = g * p.head_group + (rem - t_lin * pairs);
}

/* PRO (D = 256 at short S; session 13, helper h13d, dev/attention_sm90/README.md): the prologue of a CTA
 * that runs only a few key tiles. Q comes as two 64-row halves (the Q map's box is 64 rows), each with its
 * own full barrier (the second one after the stage barriers, CML_ATT90_PRO_SMEM_EXTRA more bytes), so
 * consumer c waits for its 32 KB of Q instead of all 64 KB; thread 0 prefetches the four tensor maps
 * before it initializes the barriers and issues the first STAGES stages right after the init fence, before
 * the __syncthreads and setmaxnreg, in the order Q0, K0, Q1, K1, V0, V1: consumer 0's first S = Q K^T
 * needs 72 KB instead of 104, its second 144 instead of 184 (V_0 after K_1; the 80-key form's two stages;
 * with the 128-key form's one stage the order is Q0, K0, Q1, V0). The arithmetic is the same: O and lse
 * bit for bit those of PRO = false. */
#define CML_ATT90_PRO_SMEM_EXTRA 8
template <int DT, int D, int BN, int STAGES, int INTRA, int PINGPONG, int TSTORE, int GROUPED = 0, bool PRO = false,
          bool HALF = false>
static __global__ void __launch_bounds__(CML_ATT90_THREADS, 1)
    cml__att90_fwd_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                          const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_o,
                          const __grid_constant__ cml__att90_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef cml__att90_smem<D, BN, STAGES> sm;
    static_assert(!HALF || (BN == 128 && !INTRA), "HALF: the loop without INTRA, 64-key halves");
    const int BM = CML_ATT90_BM;
    extern __shared__ uint8_t cml__att90_smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)cml__att90_smem_raw + 1023) & ~(uintptr_t)1023);
    uint8_t *sq = smem;
    uint8_t *sk = sq + sm::q_bytes;
    uint8_t *sv = sk + STAGES * sm::kv_bytes;
    uint64_t *q_full = (uint64_t *)(sv + STAGES * sm::kv_bytes);
    uint64_t *k_full = q_full + 1, *v_full = k_full + STAGES;
    uint64_t *k_empty = v_full + STAGES, *v_empty = k_empty + STAGES;

    /* longest causal tiles first (GROUPED: across groups of p.head_group heads). GROUPED = 0 is the
     * kernel as it was before session 11, SASS for SASS: with the tile arithmetic in a function (session
     * 10) ptxas kept the key loop's wgmma descriptors and mask bound in other registers, 17 more
     * instructions a key tile and 5% slower (session 11, dev/attention_sm90/README.md) */
    int t_lin = blockIdx.x % p.q_tiles, bh = blockIdx.x / p.q_tiles;
    if (GROUPED && p.causal && p.head_group > 0) cml__att90_group_order(p, blockIdx.x, t_lin, bh);
    const int qt = p.causal ? p.q_tiles - 1 - t_lin : t_lin;
    const int q0 = qt * BM, b = bh / p.Hq, h = bh % p.Hq, hk = h / p.group;
    const int off = p.Sk - p.Sq; /* causal: row i sees keys j <= i + off */
    int k_end = p.Sk;
    if (p.causal) k_end = min(p.Sk, max(0, min(q0 + BM, p.Sq) + off));
    const int n_tiles = (k_end + BN - 1) / BN;

    uint64_t *q_full1 = v_empty + STAGES; /* PRO: the second Q half's barrier */

    if (threadIdx.x == 0) {
        if (PRO) {
            cml__tma_prefetch_map(&map_q);
            cml__tma_prefetch_map(&map_k);
            cml__tma_prefetch_map(&map_v);
            cml__tma_prefetch_map(&map_o);
        }
        cml__mbar_init(q_full, 1);
        for (int s = 0; s < STAGES; s++) {
            cml__mbar_init(&k_full[s], 1);
            cml__mbar_init(&v_full[s], 1);
            cml__mbar_init(&k_empty[s], 2); /* one arrival per consumer */
            cml__mbar_init(&v_empty[s], 2);
        }
        if (PRO) cml__mbar_init(q_full1, 1);
        cml__mbar_init_fence();
        if (PRO && n_tiles > 0) {
            /* the first STAGES stages need no empty wait: issued before the __syncthreads (only this thread
             * uses the barriers before it), K before V: a consumer's step 1 issues S_1 (K_1) before it waits
             * for V_0, so K_1 first gives the tensor cores S_1 while V_0 streams in (dev/attention_sm90/
             * pro_sim.py). Q half c: rows q0 + 64 c, column blocks BM * 128 apart. A half wholly past S_q is
             * not loaded: its barrier gets a plain arrival (its rows are computed on whatever the buffer
             * holds, never stored) */
            cml__mbar_arrive_expect_tx(q_full, sm::q_bytes / 2);
            for (int c = 0; c < D / 64; c++)
                cml__tma_load_4d(sq + c * BM * 128, &map_q, q_full, c * 64, h, q0, b);
            for (int j = 0; j < STAGES && j < n_tiles; j++) {
                cml__mbar_arrive_expect_tx(&k_full[j], sm::kv_bytes);
                cml__att90_load<D>(sk + j * sm::kv_bytes, &map_k, &k_full[j], j * BN, hk, b, BN);
                if (j == 0) {
                    if (q0 + 64 < p.Sq) {
                        cml__mbar_arrive_expect_tx(q_full1, sm::q_bytes / 2);
                        for (int c = 0; c < D / 64; c++)
                            cml__tma_load_4d(sq + c * BM * 128 + 64 * 128, &map_q, q_full1, c * 64, h, q0 + 64, b);
                    } else {
                        cml__mbar_arrive(q_full1);
                    }
                }
            }
            for (int j = 0; j < STAGES && j < n_tiles; j++) {
                cml__mbar_arrive_expect_tx(&v_full[j], sm::kv_bytes);
                cml__att90_load<D>(sv + j * sm::kv_bytes, &map_v, &v_full[j], j * BN, hk, b, BN);
            }
        }
    }
    __syncthreads();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        cml__regs_dealloc<CML_ATT90_PRODUCER_REGS>();
        if (threadIdx.x == 0 && n_tiles > 0) {
            if (!PRO) {
                cml__tma_prefetch_map(&map_k);
                cml__tma_prefetch_map(&map_v);
                cml__mbar_arrive_expect_tx(q_full, sm::q_bytes);
                cml__att90_load<D>(sq, &map_q, q_full, q0, h, b, BM);
            }
            for (int j = PRO ? STAGES : 0; j < n_tiles; j++) {
                const int s = j % STAGES, round = j / STAGES;
                if (round > 0) cml__mbar_wait(&k_empty[s], (round - 1) & 1); /* tile j - STAGES's S is done */
                cml__mbar_arrive_expect_tx(&k_full[s], sm::kv_bytes);
                cml__att90_load<D>(sk + s * sm::kv_bytes, &map_k, &k_full[s], j * BN, hk, b, BN);
                if (round > 0) cml__mbar_wait(&v_empty[s], (round - 1) & 1); /* tile j - STAGES's P V is done */
                cml__mbar_arrive_expect_tx(&v_full[s], sm::kv_bytes);
                cml__att90_load<D>(sv + s * sm::kv_bytes, &map_v, &v_full[s], j * BN, hk, b, BN);
            }
        }
    } else {
        cml__regs_alloc<CML_ATT90_CONSUMER_REGS>();
        const int consumer = wg - 1, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
        const bool leader = threadIdx.x % 128 == 0;
        /* this thread's two query rows (fragment rows lane/4 and lane/4 + 8 of its warp's 16) */
        const int r_loc = 16 * warp + lane / 4; /* within the consumer's 64 */
        const int row_a = q0 + consumer * 64 + r_loc, row_b = row_a + 8;
        int end[2] = {p.Sk, p.Sk};
        if (p.causal) {
            end[0] = min(p.Sk, max(0, row_a + off + 1));
            end[1] = min(p.Sk, max(0, row_b + off + 1));
        }
        const int key_lane = 2 * (lane % 4);
        float o[D / 2];
        float sc[BN / 2];
        uint32_t pa[BN / 4]; /* P as 16-bit pairs: the A fragments of BN / 16 wgmmas */
        float m[2] = {__int_as_float(0xff800000), __int_as_float(0xff800000)}, l[2] = {0.0f, 0.0f}, corr[2];
#pragma unroll
        for (int i = 0; i < D / 2; i++) o[i] = 0.0f;
        /* ping-pong: consumer 0 issues first (barrier 1 is consumer 0's turn, 2 consumer 1's) */
        if (PINGPONG && consumer == 1) cml__att90_bar_arrive(1, 256);
        const uint32_t q_addr = cml__smem_addr(sq) + consumer * 64 * 128;
        const int first_masked = p.Sk / BN; /* tiles from here on cross the end of the keys */
        /* tiles from here on cross the diagonal of the CTA's first row (q0 + off may be < 0) */
        const int diag = p.causal ? (q0 + off + 1 > 0 ? (q0 + off + 1) / BN : 0) : first_masked;
        const int mask_from = min(first_masked, diag);

        if (n_tiles > 0) {
            cml__mbar_wait(PRO && consumer == 1 ? q_full1 : q_full, 0); /* PRO: this consumer's Q half */
            if (!INTRA) {
                /* HALF: the last key tile's second half (keys BN / 2 ..) is past every row of this consumer
                 * (causal diagonal: consumer 0 of a 128-row tile): its step computes the first half only */
                int vis = p.causal ? min(p.Sk, max(0, min(q0 + consumer * 64 + 64, p.Sq) + off)) : p.Sk;
                vis = __shfl_sync(0xffffffffu, vis, 0);
                const bool half_last = HALF && vis <= (n_tiles - 1) * BN + BN / 2;
                for (int j = 0; j < n_tiles - (half_last ? 1 : 0); j++)
                    cml__att90_step<DT, D, BN, BN, STAGES, PINGPONG>(o, sc, pa, m, l, corr, q_addr, sk, sv, k_full,
                                                                   v_full, k_empty, v_empty, j, consumer, leader,
                                                                   j >= mask_from, j * BN + key_lane, end,
                                                                   p.scale_log2);
                if (HALF && half_last) {
                    float sh[BN / 4];
                    uint32_t ph[BN / 8];
                    cml__att90_step<DT, D, BN, (HALF ? BN / 2 : BN), STAGES, PINGPONG>(
                        o, sh, ph, m, l, corr, q_addr, sk, sv, k_full, v_full, k_empty, v_empty, n_tiles - 1,
                        consumer, leader, true, (n_tiles - 1) * BN + key_lane, end, p.scale_log2);
                }
            } else {
                /* tile 0: S only */
                cml__mbar_wait(&k_full[0], 0);
                if (PINGPONG) cml__att90_bar_sync(1 + consumer, 256);
                cml__wgmma_fence();
                cml__att90_qk<DT, D, BN>(sc, q_addr, cml__smem_addr(sk));
                cml__wgmma_commit();
                if (PINGPONG) cml__att90_bar_arrive(2 - consumer, 256);
                cml__wgmma_wait<0>();
                cml__wgmma_reg_fence<BN / 2>(sc);
                if (leader) cml__mbar_arrive(&k_empty[0]);
                cml__att90_softmax<BN>(sc, m, l, corr, 0 >= mask_from, key_lane, end, p.scale_log2);
                cml__att90_to_p<DT, BN>(pa, sc);
                /* tile j: S_j = Q K_j and O += P_{j-1} V_{j-1} in flight together; softmax of S_j under P V */
                for (int j = 1; j < n_tiles; j++) {
                    const int s = j % STAGES, parity = (j / STAGES) & 1;
                    const int sp = (j - 1) % STAGES, parity_p = ((j - 1) / STAGES) & 1;
                    cml__mbar_wait(&k_full[s], parity); /* K_j landed (fill j / STAGES of stage s) */
                    if (PINGPONG) cml__att90_bar_sync(1 + consumer, 256);
                    cml__wgmma_fence();
                    cml__att90_qk<DT, D, BN>(sc, q_addr, cml__smem_addr(sk + s * sm::kv_bytes));
                    cml__wgmma_commit();
                    cml__mbar_wait(&v_full[sp], parity_p); /* V_{j-1} landed */
                    cml__att90_pv<DT, D, BN>(o, pa, cml__smem_addr(sv + sp * sm::kv_bytes));
                    cml__wgmma_commit();
                    if (PINGPONG) cml__att90_bar_arrive(2 - consumer, 256);
                    cml__wgmma_wait<1>(); /* S_j done, P V may still run */
                    cml__wgmma_reg_fence<BN / 2>(sc);
                    if (leader) cml__mbar_arrive(&k_empty[s]);
                    cml__att90_softmax<BN>(sc, m, l, corr, j >= mask_from, j * BN + key_lane, end, p.scale_log2);
                    cml__wgmma_wait<0>(); /* P_{j-1} V_{j-1} done: O and pa are ours again */
                    cml__wgmma_reg_fence<D / 2>(o);
                    cml__att90_keep<BN / 4>(pa);
                    if (leader) cml__mbar_arrive(&v_empty[sp]);
                    cml__att90_rescale<D>(o, corr);
                    cml__att90_to_p<DT, BN>(pa, sc);
                }
                const int s = (n_tiles - 1) % STAGES;
                cml__mbar_wait(&v_full[s], ((n_tiles - 1) / STAGES) & 1);
                cml__wgmma_fence();
                cml__att90_pv<DT, D, BN>(o, pa, cml__smem_addr(sv + s * sm::kv_bytes));
                cml__wgmma_commit();
                cml__wgmma_wait<0>();
                cml__wgmma_reg_fence<D / 2>(o);
                cml__att90_keep<BN / 4>(pa);
                if (leader) cml__mbar_arrive(&v_empty[s]);
            }
        }
        /* consumer 1's last arrival on barrier 1 (it arrived once ahead) is taken here */
        if (PINGPONG && consumer == 0) cml__att90_bar_sync(1, 256);

        /* O / l; l = 0 (no visible key) gives O = 0, lse = -inf */
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        }
        const float inv_a = l[0] > 0.0f ? 1.0f / l[0] : 0.0f, inv_b = l[1] > 0.0f ? 1.0f / l[1] : 0.0f;
        if (TSTORE) {
            /* into this consumer's rows of the Q buffer (its own QK^T products are finished), in the
             * 128-byte swizzle: 16-byte chunk c of row r sits at chunk c ^ (r % 8) */
            uint8_t *so = sq + consumer * 64 * 128;
#pragma unroll
            for (int q = 0; q < D / 8; q++) {
                uint8_t *blk = so + (q / 8) * BM * 128;
                const int chunk = ((q % 8) ^ (r_loc % 8)) * 16 + (lane % 4) * 4;
                *(uint32_t *)(blk + r_loc * 128 + chunk) = cml__att90_pack<DT>(o[4 * q] * inv_a, o[4 * q + 1] * inv_a);
                *(uint32_t *)(blk + (r_loc + 8) * 128 + chunk) =
                    cml__att90_pack<DT>(o[4 * q + 2] * inv_b, o[4 * q + 3] * inv_b);
            }
            cml__fence_proxy_async_smem();
            cml__att90_bar_sync(3 + consumer, 128);
            if (leader && q0 + consumer * 64 < p.Sq) {
#pragma unroll
                for (int c = 0; c < D / 64; c++)
                    cml__tma_store_4d(&map_o, so + c * BM * 128, c * 64, h, q0 + consumer * 64, b);
                cml__bulk_commit();
                cml__bulk_wait_read<0>();
            }
        } else {
            uint16_t *O = (uint16_t *)p.O + b * p.o_sb + h * p.o_sh;
#pragma unroll
            for (int q = 0; q < D / 8; q++) {
                const int d = 8 * q + key_lane;
                if (row_a < p.Sq)
                    *(uint32_t *)(O + (long long)row_a * p.o_ss + d) =
                        cml__att90_pack<DT>(o[4 * q] * inv_a, o[4 * q + 1] * inv_a);
                if (row_b < p.Sq)
                    *(uint32_t *)(O + (long long)row_b * p.o_ss + d) =
                        cml__att90_pack<DT>(o[4 * q + 2] * inv_b, o[4 * q + 3] * inv_b);
            }
        }
        if (p.lse && lane % 4 == 0) {
            const float ln2 = 0.6931471805599453f;
            float *lse = p.lse + ((long long)b * p.Hq + h) * p.Sq;
            const float ninf = __int_as_float(0xff800000);
            if (row_a < p.Sq) lse[row_a] = l[0] > 0.0f ? (m[0] * p.scale_log2 + log2f(l[0])) * ln2 : ninf;
            if (row_b < p.Sq) lse[row_b] = l[1] > 0.0f ? (m[1] * p.scale_log2 + log2f(l[1])) * ln2 : ninf;
        }
    }
#endif
}


/* Persistent variant (FlashAttention-3 style scheduling): gridDim.x CTAs (at most one per SM)
 * take (query tile, head) work tiles: tile blockIdx.x first, then the next unclaimed one from
 * p.tile_counter (claimed by the producer, handed to the consumers with the Q tile through
 * tile_id in shared memory). The producer loads the next tile's Q and first K/V stages while the
 * consumers finish the current one, so a tile's load latency and epilogue overlap work.
 * Work tiles are numbered head-major, the longest causal tiles of a head first, or (causal,
 * p.head_group > 0) longest first across a group of heads. Which CTA
 * computes a tile does not change how it is computed: results stay bitwise reproducible.
 * SEP_O: the epilogue stages O in its own buffer (Q may be refilled as soon as the consumers'
 * last Q K^T is done); otherwise in the Q buffer (D = 256: no room), which is then released
 * after the TMA store has read it. Always INTRA + PINGPONG + TMA store.
 * NC consumer warpgroups of 64 query rows each: work tiles of BM = 64 NC rows, 128 (NC + 1)
 * threads. NC = 2 (D = 128): setmaxnreg 24 / 240, the two consumers alternate their GEMM issues.
 * NC = 3 (D = 64, FlashAttention-3's 192-row tiles): setmaxnreg 24 / 160 (128 x (24 + 3 x 160)
 * <= 64K), the GEMM issues rotate 0 -> 1 -> 2 -> 0 (each consumer has two other consumers' GEMM
 * turns for its softmax: at D = 64 the exp takes as long as the GEMMs), and every K / V tile
 * loaded serves 192 rows instead of 128. A consumer computes only the key tiles its own rows
 * see (a 192-row causal tile reaches further than its first consumers' rows; rows past S_q see
 * none). Bitwise the same O and lse as the 128-row tiles gave, except where a 128-row tile ran a
 * consumer's rows through a key tile fully masked for them (causal, S_q > S_kv, or S_kv - S_q not a
 * multiple of 128): such a tile is not an exact no-op -- its correction ex2(m s - base) is an FFMA
 * of the rounding error, 1 +- 1 ulp -- and this kernel skips it (1-2 ulps, session 10 README).
 * QSHIFT (NC > 2 only; a kernel of its own, so that the unshifted one keeps its code): query tiles aligned
 * to the end of the sequence by p.q_shift rows (cml__att90_decode); a consumer whose rows lie past the
 * tile's end (q_hi) passes its turns as one whose rows lie past S_q does. */
#define CML_ATT90_P_THREADS(NC) (128 * ((NC) + 1))
#define CML_ATT90_P_CONSUMER_REGS(NC) ((NC) == 2 ? CML_ATT90_CONSUMER_REGS : 160)
template <int D, int BN, int STAGES, int SEP_O, int NC = 2>
struct cml__att90_psmem {
    enum {
        q_bytes = 64 * NC * D * 2,
        o_bytes = SEP_O ? 64 * NC * D * 2 : 0,
        kv_bytes = BN * D * 2,
        total = 1024 + q_bytes + o_bytes + 2 * STAGES * kv_bytes + 8 * (2 + 4 * STAGES) + 16
    };
};

/* The work tile's coordinates and its number of key tiles. */
struct cml__att90_tile {
    int q0, b, h, n_tiles;
    int q_hi; /* the tile's rows are [q0, q_hi) */
};

/* QSHIFT (causal D = 64 with S_q % 64 == 0, p.q_shift = 64 or 128; session 12, helpers h12e / h12g,
 * dev/attention_sm90/README.md): tile boundaries at S_q - k BM instead of k BM, so the partial tile
 * (S_q % BM rows) is the one at the start of the sequence, which sees one key tile, instead of the one at
 * the end, which sees them all with one or two of its three consumers idle. Every 64-row block of a
 * consumer keeps its rows, key tiles and mask start: the same O and lse bit for bit. */
template <int BN, int GROUPED, int BM = CML_ATT90_BM, bool QSHIFT = false>
static __device__ __forceinline__ cml__att90_tile cml__att90_decode(const cml__att90_params &p, int tile) {
    cml__att90_tile t;
    int t_lin = tile % p.q_tiles, bh = tile / p.q_tiles;
    /* only the tile -> coordinates map changes (once per work tile, outside the consumer's key loop) */
    if (GROUPED && p.causal && p.head_group > 0) cml__att90_group_order(p, tile, t_lin, bh);
    const int qt = p.causal ? p.q_tiles - 1 - t_lin : t_lin;
    t.q0 = qt * BM;
    t.b = bh / p.Hq;
    t.h = bh % p.Hq;
    int k_end = p.Sk;
    if (QSHIFT) { /* the first tile starts at row 0 (no negative TMA coordinate; rows past q_hi are not its own) */
        const int s0 = t.q0 - p.q_shift;
        t.q0 = max(0, s0);
        t.q_hi = min(s0 + BM, p.Sq);
        if (p.causal) k_end = min(p.Sk, max(0, t.q_hi + p.Sk - p.Sq));
    } else { /* written as before QSHIFT existed: the same code */
        t.q_hi = min(t.q0 + BM, p.Sq);
        if (p.causal) k_end = min(p.Sk, max(0, min(t.q0 + BM, p.Sq) + p.Sk - p.Sq));
    }
    t.n_tiles = (k_end + BN - 1) / BN;
    return t;
}

template <int DT, int D, int BN, int STAGES, int SEP_O, int NC = 2, bool QSHIFT = false>
static __global__ void __launch_bounds__(CML_ATT90_P_THREADS(NC), 1)
    cml__att90_fwd_persistent_kernel(const __grid_constant__ CUtensorMap map_q,
                                     const __grid_constant__ CUtensorMap map_k,
                                     const __grid_constant__ CUtensorMap map_v,
                                     const __grid_constant__ CUtensorMap map_o,
                                     const __grid_constant__ cml__att90_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef cml__att90_psmem<D, BN, STAGES, SEP_O, NC> sm;
    static_assert(!QSHIFT || NC > 2, "QSHIFT: a consumer whose rows are past the tile's end is skipped by the NC > 2 count");
    const int BM = 64 * NC;
    extern __shared__ uint8_t cml__att90_smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)cml__att90_smem_raw + 1023) & ~(uintptr_t)1023);
    uint8_t *sq = smem;
    uint8_t *so_all = SEP_O ? sq + sm::q_bytes : sq;
    uint8_t *sk = sq + sm::q_bytes + sm::o_bytes;
    uint8_t *sv = sk + STAGES * sm::kv_bytes;
    uint64_t *q_full = (uint64_t *)(sv + STAGES * sm::kv_bytes);
    uint64_t *q_empty = q_full + 1;
    uint64_t *k_full = q_empty + 1, *v_full = k_full + STAGES;
    uint64_t *k_empty = v_full + STAGES, *v_empty = k_empty + STAGES;
    volatile int *tile_id = (volatile int *)(v_empty + STAGES);

    if (threadIdx.x == 0) {
        cml__mbar_init(q_full, 1);
        cml__mbar_init(q_empty, SEP_O ? 4 * NC : NC); /* SEP_O: one arrival per consumer warp, else per consumer */
        for (int s = 0; s < STAGES; s++) {
            cml__mbar_init(&k_full[s], 1);
            cml__mbar_init(&v_full[s], 1);
            cml__mbar_init(&k_empty[s], NC);
            cml__mbar_init(&v_empty[s], NC);
        }
        cml__mbar_init_fence();
    }
    __syncthreads();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        cml__regs_dealloc<CML_ATT90_PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            cml__tma_prefetch_map(&map_q);
            cml__tma_prefetch_map(&map_k);
            cml__tma_prefetch_map(&map_v);
            int it = 0, round_q = 0;
            for (int tile = blockIdx.x; tile < p.total_tiles; round_q++) {
                const cml__att90_tile t = cml__att90_decode<BN, D == 128, BM, QSHIFT>(p, tile);
                const int hk = t.h / p.group;
                if (round_q > 0) cml__mbar_wait(q_empty, (round_q - 1) & 1); /* the last tile's Q is read */
                *tile_id = tile;
                cml__mbar_arrive_expect_tx(q_full, sm::q_bytes); /* releases tile_id with the phase */
                cml__att90_load<D>(sq, &map_q, q_full, t.q0, t.h, t.b, BM);
                for (int j = 0; j < t.n_tiles; j++, it++) {
                    const int s = it % STAGES, round = it / STAGES;
                    if (round > 0) cml__mbar_wait(&k_empty[s], (round - 1) & 1);
                    cml__mbar_arrive_expect_tx(&k_full[s], sm::kv_bytes);
                    cml__att90_load<D>(sk + s * sm::kv_bytes, &map_k, &k_full[s], j * BN, hk, t.b, BN);
                    if (round > 0) cml__mbar_wait(&v_empty[s], (round - 1) & 1);
                    cml__mbar_arrive_expect_tx(&v_full[s], sm::kv_bytes);
                    cml__att90_load<D>(sv + s * sm::kv_bytes, &map_v, &v_full[s], j * BN, hk, t.b, BN);
                }
                tile = atomicAdd(p.tile_counter, 1) + gridDim.x;
            }
            /* no more work: tile_id -1 through a plain arrival */
            if (round_q > 0) cml__mbar_wait(q_empty, (round_q - 1) & 1);
            *tile_id = -1;
            cml__mbar_arrive(q_full);
        }
    } else {
        cml__regs_alloc<CML_ATT90_P_CONSUMER_REGS(NC)>();
        const int consumer = wg - 1, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
        const bool leader = threadIdx.x % 128 == 0;
        /* GEMM turns: named barrier 1 + c is consumer c's; it arrives on the next consumer's after
         * issuing (FlashAttention-3's scheduler barriers); 1 + NC + c: the consumer's epilogue */
        const int next_bar = NC == 2 ? 2 - consumer : (consumer == NC - 1 ? 1 : consumer + 2);
        const int r_loc = 16 * warp + lane / 4, key_lane = 2 * (lane % 4);
        const uint32_t q_addr = cml__smem_addr(sq) + consumer * 64 * 128;
        uint8_t *so = so_all + consumer * 64 * 128;
        const int off = p.Sk - p.Sq;
        float o[D / 2];
        float sc[BN / 2];
        uint32_t pa[BN / 4];
        if (consumer == NC - 1) cml__att90_bar_arrive(1, 256); /* GEMM turns: consumer 0 issues first */
        int it = 0;
        for (int round_q = 0;; round_q++) {
            cml__mbar_wait(q_full, round_q & 1);
            /* read by lane 0 only (the lane that later releases Q and tile_id for its warp) and
             * shuffled, so that the compiler sees a warp-uniform value: a branch on it that looked
             * divergent would make ptxas serialize the wgmmas (C7520) */
            const int tile = __shfl_sync(0xffffffffu, lane == 0 ? *tile_id : 0, 0);
            if (tile < 0) break;
            const cml__att90_tile t = cml__att90_decode<BN, D == 128, BM, QSHIFT>(p, tile);
            const int q_lim = QSHIFT ? t.q_hi : p.Sq; /* rows at or past it are not this tile's */
            const int row_a = t.q0 + consumer * 64 + r_loc, row_b = row_a + 8;
            int end[2] = {p.Sk, p.Sk};
            if (p.causal) {
                end[0] = min(p.Sk, max(0, row_a + off + 1));
                end[1] = min(p.Sk, max(0, row_b + off + 1));
            }
            /* n: this consumer's key tiles. NC > 2: the key tiles past its last row (a causal diagonal's
             * first consumers; every tile when its rows are all past S_q) are not computed, only passed
             * (their GEMM turns and stage releases, after the last P V): the work of 64-row tiles (a
             * 192-row tile would compute 11% more at causal S = 2k, 3% at full 2k). Bitwise the same:
             * those tiles are fully masked for its rows. The first row shuffled from lane 0: a warp-uniform
             * loop bound and mask test for the compiler (C7520; a divergent-looking test costs a BSSY) */
            int n = t.n_tiles, diag_row = t.q0;
            if (NC > 2) {
                const int r0 = __shfl_sync(0xffffffffu, t.q0 + consumer * 64, 0);
                int k_end = r0 < q_lim ? p.Sk : 0;
                if (p.causal) k_end = min(k_end, max(0, min(r0 + 64, q_lim) + off));
                n = (k_end + BN - 1) / BN;
                diag_row = r0;
            }
            const int first_masked = p.Sk / BN;
            const int diag = p.causal ? (diag_row + off + 1 > 0 ? (diag_row + off + 1) / BN : 0) : first_masked;
            const int mask_from = min(first_masked, diag);
            float m[2] = {__int_as_float(0xff800000), __int_as_float(0xff800000)}, l[2] = {0.0f, 0.0f}, corr[2];
#pragma unroll
            for (int i = 0; i < D / 2; i++) o[i] = 0.0f;
            /* SEP_O: Q (and tile_id) may be refilled once every consumer warp is past its last Q K^T;
             * the __syncwarp orders the warp's reads of tile_id before the arrival */
            if (n == 0 && SEP_O) {
                __syncwarp();
                if (lane == 0) cml__mbar_arrive(q_empty);
            }
            if (n > 0) {
                /* tile 0: S only */
                {
                    const int s = it % STAGES;
                    cml__mbar_wait(&k_full[s], (it / STAGES) & 1);
                    cml__att90_bar_sync(1 + consumer, 256);
                    cml__wgmma_fence();
                    cml__att90_qk<DT, D, BN, BM>(sc, q_addr, cml__smem_addr(sk + s * sm::kv_bytes));
                    cml__wgmma_commit();
                    cml__att90_bar_arrive(next_bar, 256);
                    cml__wgmma_wait<0>();
                    cml__wgmma_reg_fence<BN / 2>(sc);
                    if (leader) cml__mbar_arrive(&k_empty[s]);
                    if (SEP_O && n == 1) {
                        __syncwarp();
                        if (lane == 0) cml__mbar_arrive(q_empty);
                    }
                    cml__att90_softmax<BN>(sc, m, l, corr, 0 >= mask_from, key_lane, end, p.scale_log2);
                    cml__att90_to_p<DT, BN>(pa, sc);
                }
                for (int j = 1; j < n; j++) {
                    const int g = it + j, s = g % STAGES, sp = (g - 1) % STAGES;
                    cml__mbar_wait(&k_full[s], (g / STAGES) & 1);
                    cml__att90_bar_sync(1 + consumer, 256);
                    cml__wgmma_fence();
                    cml__att90_qk<DT, D, BN, BM>(sc, q_addr, cml__smem_addr(sk + s * sm::kv_bytes));
                    cml__wgmma_commit();
                    cml__mbar_wait(&v_full[sp], ((g - 1) / STAGES) & 1);
                    cml__att90_pv<DT, D, BN>(o, pa, cml__smem_addr(sv + sp * sm::kv_bytes));
                    cml__wgmma_commit();
                    cml__att90_bar_arrive(next_bar, 256);
                    cml__wgmma_wait<1>();
                    cml__wgmma_reg_fence<BN / 2>(sc);
                    if (leader) cml__mbar_arrive(&k_empty[s]);
                    if (SEP_O && j == n - 1) { /* the tile's last Q K^T is done */
                        __syncwarp();
                        if (lane == 0) cml__mbar_arrive(q_empty);
                    }
                    cml__att90_softmax<BN>(sc, m, l, corr, j >= mask_from, j * BN + key_lane, end, p.scale_log2);
                    cml__wgmma_wait<0>();
                    cml__wgmma_reg_fence<D / 2>(o);
                    cml__att90_keep<BN / 4>(pa);
                    if (leader) cml__mbar_arrive(&v_empty[sp]);
                    cml__att90_rescale<D>(o, corr);
                    cml__att90_to_p<DT, BN>(pa, sc);
                }
                const int g = it + n - 1, s = g % STAGES;
                cml__mbar_wait(&v_full[s], (g / STAGES) & 1);
                cml__wgmma_fence();
                cml__att90_pv<DT, D, BN>(o, pa, cml__smem_addr(sv + s * sm::kv_bytes));
                cml__wgmma_commit();
                cml__wgmma_wait<0>();
                cml__wgmma_reg_fence<D / 2>(o);
                cml__att90_keep<BN / 4>(pa);
                if (leader) cml__mbar_arrive(&v_empty[s]);
            }
            /* NC > 2: the tile's key tiles past this consumer's rows: pass the GEMM turn, release the
             * stages (each after its full barrier: an earlier arrival would count for the stage's
             * previous fill, still being read by the other consumers) */
            for (int j = n; j < t.n_tiles; j++) {
                const int g = it + j, s = g % STAGES;
                cml__mbar_wait(&k_full[s], (g / STAGES) & 1);
                cml__att90_bar_sync(1 + consumer, 256);
                cml__att90_bar_arrive(next_bar, 256);
                if (leader) cml__mbar_arrive(&k_empty[s]);
                cml__mbar_wait(&v_full[s], (g / STAGES) & 1);
                if (leader) cml__mbar_arrive(&v_empty[s]);
            }
            it += t.n_tiles;

            /* epilogue: O / l through shared memory and a TMA store per 64 columns */
#pragma unroll
            for (int r = 0; r < 2; r++) {
                l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
                l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
            }
            const float inv_a = l[0] > 0.0f ? 1.0f / l[0] : 0.0f, inv_b = l[1] > 0.0f ? 1.0f / l[1] : 0.0f;
            if (SEP_O) {
                if (leader) cml__bulk_wait_read<0>(); /* the last tile's store has read the buffer */
                cml__att90_bar_sync(1 + NC + consumer, 128);
            }
#pragma unroll
            for (int q = 0; q < D / 8; q++) {
                uint8_t *blk = so + (q / 8) * BM * 128;
                const int chunk = ((q % 8) ^ (r_loc % 8)) * 16 + (lane % 4) * 4;
                *(uint32_t *)(blk + r_loc * 128 + chunk) = cml__att90_pack<DT>(o[4 * q] * inv_a, o[4 * q + 1] * inv_a);
                *(uint32_t *)(blk + (r_loc + 8) * 128 + chunk) =
                    cml__att90_pack<DT>(o[4 * q + 2] * inv_b, o[4 * q + 3] * inv_b);
            }
            cml__fence_proxy_async_smem();
            cml__att90_bar_sync(1 + NC + consumer, 128);
            if (leader) {
                if (t.q0 + consumer * 64 < q_lim) {
#pragma unroll
                    for (int c = 0; c < D / 64; c++)
                        cml__tma_store_4d(&map_o, so + c * BM * 128, c * 64, t.h, t.q0 + consumer * 64, t.b);
                    cml__bulk_commit();
                }
                if (!SEP_O) { /* after the barrier above: every thread of the consumer is done with Q and tile_id */
                    cml__bulk_wait_read<0>(); /* O staged in the Q buffer: read before Q is refilled */
                    cml__mbar_arrive(q_empty);
                }
            }
            if (p.lse && lane % 4 == 0) {
                const float ln2 = 0.6931471805599453f;
                float *lse = p.lse + ((long long)t.b * p.Hq + t.h) * p.Sq;
                if (row_a < q_lim)
                    lse[row_a] = l[0] > 0.0f ? (m[0] * p.scale_log2 + log2f(l[0])) * ln2 : __int_as_float(0xff800000);
                if (row_b < q_lim)
                    lse[row_b] = l[1] > 0.0f ? (m[1] * p.scale_log2 + log2f(l[1])) * ln2 : __int_as_float(0xff800000);
            }
        }
        if (consumer == 0) cml__att90_bar_sync(1, 256); /* consumer NC - 1's extra arrival */
        if (leader) cml__bulk_wait_read<0>();
    }
#endif
}

#endif
