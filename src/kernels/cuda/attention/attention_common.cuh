/* Pieces shared by the CUDA attention kernels (attention_*.cu): the launch
 * parameters, which keys a query sees, where a block's slices start, tile loads
 * from the strided global layouts into shared memory, and warp reductions.
 *
 * Layout (camel/kernels.h): element (b, s, h, d) of Q is at
 * b * qs[0] + s * qs[1] + h * qs[2] + d, likewise K, V (ks, vs), O and dO (os).
 * Tiles are stored in shared memory as rows of DP (the head dim rounded up to
 * the kernel's compile-time size) plus padding; elements past D, and rows past
 * the sequence end, are zeros, so they add nothing to any dot product and
 * 0 * V stays 0 (never 0 * NaN from uninitialized memory).
 *
 * Variable-length batches (cml_attention_desc's cu_seqlens_q/kv): a block serves one
 * sequence b, so it binds the parameters to it first (cml__attn_bind): S_q and S_kv
 * become that sequence's lengths and q0, kv0 its first packed rows, which the slices
 * add; everything after works as for one sequence of a fixed-length batch. The grids
 * stay sized by the bounds S_q, S_kv: tiles past a sequence's end find no work. lse
 * and Di keep their (B, H_q, S_q) rows (lse_ld = the bound S_q). */
#ifndef CML_KERNELS_CUDA_ATTENTION_ATTENTION_COMMON_CUH
#define CML_KERNELS_CUDA_ATTENTION_ATTENTION_COMMON_CUH

#include <stdint.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define CML_ATTN_LOG2E 1.4426950408889634f
#define CML_ATTN_LN2 0.6931471805599453f
#define CML_ATTN_NEG_INF __int_as_float(0xff800000)

/* Everything a forward or backward kernel reads; one by-value kernel parameter. */
typedef struct cml__attn_params {
    const void *Q, *K, *V, *dO;
    void *O;            /* written by the forward, read by the backward */
    void *dQ, *dK, *dV; /* backward outputs */
    float *lse_out;     /* forward: (B, H_q, S_q) or NULL */
    const float *lse;   /* backward input */
    const float *Di;    /* backward: rowsum(dO * O), (B, H_q, S_q) */
    long long qs[3], ks[3], vs[3], os[3]; /* batch, seq, head strides (elements) */
    int B, H_q, H_kv, S_q, S_kv, D, group;
    int dtype;          /* cml_dtype of Q, K, V, O and the gradients */
    int causal;
    int vec;            /* every tile row may be moved as 8-element (16-byte for 16-bit types) vectors */
    float scale;        /* multiplies Q K^T */
    float scale_log2;   /* scale * log2(e): scores go through exp2 */
    int lse_ld;         /* rows of lse and Di per (b, h): the descriptor's S_q */
    const int32_t *cu_q, *cu_kv;  /* varlen: B + 1 offsets each (device memory), else NULL */
    long long total_q, total_kv;  /* varlen: rows of the packed buffers, which bound every access */
    long long q0, kv0;            /* after cml__attn_bind: the sequence's first packed rows (0 if not varlen) */
} cml__attn_params;

/* Whether a descriptor is a variable-length batch (host; the sm90 paths decline those). */
static inline bool cml__attn_desc_varlen(const cml_attention_desc *d) {
    return d->cu_seqlens_q != NULL || d->cu_seqlens_kv != NULL;
}

/* Sequence b's rows [first, first + n) of a packed buffer of `total` rows, n returned. The
 * offsets are data nobody checked on the host, so they are clamped: whatever they hold,
 * 0 <= first <= first + n <= total and n <= max_len. */
static __device__ __forceinline__ int cml__attn_seq_rows(const int32_t *cu, int b, long long total, int max_len,
                                                         long long &first) {
    long long s = cu[b], e = cu[b + 1];
    s = s < 0 ? 0 : s > total ? total : s;
    e = e < s ? s : e > total ? total : e;
    first = s;
    return e - s < max_len ? (int)(e - s) : max_len;
}

/* The parameters for a block that serves batch entry b: for a variable-length batch, S_q and
 * S_kv become sequence b's lengths and q0, kv0 its first rows; otherwise unchanged. */
static __device__ __forceinline__ cml__attn_params cml__attn_bind(const cml__attn_params &g, int b) {
    cml__attn_params p = g;
    if (g.cu_q) {
        p.S_q = cml__attn_seq_rows(g.cu_q, b, g.total_q, g.S_q, p.q0);
        p.S_kv = cml__attn_seq_rows(g.cu_kv, b, g.total_kv, g.S_kv, p.kv0);
    }
    return p;
}

/* Keys a query row i sees: [0, visible_end). Causal alignment is bottom right. */
static __device__ __forceinline__ int cml__attn_visible_end(const cml__attn_params &p, long long i) {
    if (i >= p.S_q) return 0;
    if (!p.causal) return p.S_kv;
    long long e = i + (long long)p.S_kv - p.S_q + 1;
    return e < 0 ? 0 : e > p.S_kv ? p.S_kv : (int)e;
}

/* Whether query i sees key j (both possibly past their sequence ends). */
static __device__ __forceinline__ bool cml__attn_sees(const cml__attn_params &p, long long i, long long j) {
    if (i >= p.S_q || j >= p.S_kv) return false;
    return !p.causal || j <= i + (long long)p.S_kv - p.S_q;
}

/* The first query that sees key j0 (S_q where none does): a key block's query tiles start there. */
static __device__ __forceinline__ int cml__attn_first_query(const cml__attn_params &p, int j0) {
    long long first = p.causal ? (long long)j0 - ((long long)p.S_kv - p.S_q) : 0;
    return first < 0 ? 0 : first > p.S_q ? p.S_q : (int)first;
}

/* Keys [0, end) that some row of the query tile i0 .. i0 + rows - 1 sees: its last row sees the most. */
static __device__ __forceinline__ int cml__attn_tile_kv_end(const cml__attn_params &p, int i0, int rows) {
    const int last = (i0 + rows < p.S_q ? i0 + rows : p.S_q) - 1;
    return cml__attn_visible_end(p, last);
}

/* Element offsets of the (b, h) slices of Q and O / dO, of the (b, hk) slices of K and V
 * (from the bound sequence's first rows, for varlen), and of the (b, h) rows of lse and Di. */
typedef struct cml__attn_slices {
    long long q, o, k, v, row;
} cml__attn_slices;

static __device__ __forceinline__ cml__attn_slices cml__attn_slices_of(const cml__attn_params &p, int b, int h,
                                                                      int hk) {
    cml__attn_slices s;
    s.q = b * p.qs[0] + p.q0 * p.qs[1] + h * p.qs[2], s.o = b * p.os[0] + p.q0 * p.os[1] + h * p.os[2];
    s.k = b * p.ks[0] + p.kv0 * p.ks[1] + hk * p.ks[2], s.v = b * p.vs[0] + p.kv0 * p.vs[1] + hk * p.vs[2];
    s.row = ((long long)b * p.H_q + h) * p.lse_ld;
    return s;
}

/* The slices of a block that owns query head bh = b H_q + h (its kv head: h / group); p bound to b. */
static __device__ __forceinline__ cml__attn_slices cml__attn_slices_of_bh(const cml__attn_params &p, int bh) {
    const int b = bh / p.H_q, h = bh % p.H_q;
    return cml__attn_slices_of(p, b, h, h / p.group);
}

/* Backward: the keys [0, end) query row i sees, and its lse (exp2 domain) and Di into l2, di
 * (0 for a row that sees none, which includes rows past S_q). */
static __device__ __forceinline__ int cml__attn_bwd_row(const cml__attn_params &p, const cml__attn_slices &sl, int i,
                                                        float &l2, float &di) {
    const int end = cml__attn_visible_end(p, i);
    l2 = end > 0 ? p.lse[sl.row + i] * CML_ATTN_LOG2E : 0.0f;
    di = end > 0 ? p.Di[sl.row + i] : 0.0f;
    return end;
}

/* All-reduce over the 16 lanes of a half warp, or the 4 lanes of an mma quad: xor
 * butterflies, so every lane ends with the same bits. */
static __device__ __forceinline__ float cml__attn_max16(float v) {
    for (int off = 8; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
static __device__ __forceinline__ float cml__attn_sum16(float v) {
    for (int off = 8; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
static __device__ __forceinline__ float cml__attn_max4(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
static __device__ __forceinline__ float cml__attn_sum4(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* Rows row0 .. row0 + ROWS of one (b, h) slice (element offset base, row stride rs)
 * into dst as f32, DP + 4 floats a row (16-byte aligned rows, and the padding
 * spreads a column's rows over the banks). nvalid rows exist (may be <= 0). */
template <int DT, int DP, int ROWS, int NT>
static __device__ __forceinline__ void cml__attn_load_f32(float *dst, const void *src, long long base, long long rs,
                                                          int row0, int nvalid, int D, bool vec) {
    typedef typename cml__elem<DT>::type T;
    constexpr int LD = DP + 4;
    if (vec) {
        constexpr int VPR = DP / 8; /* 8-element vectors per row */
        for (int v = threadIdx.x; v < ROWS * VPR; v += NT) {
            const int r = v / VPR, d = (v % VPR) * 8;
            float x[8];
            if (r < nvalid && d < D) {
                cml__load_vec<DT>(src, (base + (long long)(row0 + r) * rs + d) / 8, x);
            } else {
#pragma unroll
                for (int k = 0; k < 8; k++) x[k] = 0.0f;
            }
            float4 *o = (float4 *)(dst + r * LD + d);
            o[0] = make_float4(x[0], x[1], x[2], x[3]);
            o[1] = make_float4(x[4], x[5], x[6], x[7]);
        }
    } else {
        for (int e = threadIdx.x; e < ROWS * DP; e += NT) {
            const int r = e / DP, d = e % DP;
            float x = 0.0f;
            if (r < nvalid && d < D) x = cml__to_f32<DT>(((const T *)src)[base + (long long)(row0 + r) * rs + d]);
            dst[r * LD + d] = x;
        }
    }
}

/* The same for 16-bit types kept as they are (tensor-core operands), DP + 8
 * elements a row: 16-byte aligned rows whose 8 consecutive rows fall in 8
 * different 16-byte bank groups, as ldmatrix wants. */
template <int DP, int ROWS, int NT>
static __device__ __forceinline__ void cml__attn_load_b16(uint16_t *dst, const void *src, long long base, long long rs,
                                                          int row0, int nvalid, int D, bool vec) {
    constexpr int LD = DP + 8;
    const uint16_t *s = (const uint16_t *)src;
    if (vec) {
        constexpr int VPR = DP / 8;
        for (int v = threadIdx.x; v < ROWS * VPR; v += NT) {
            const int r = v / VPR, d = (v % VPR) * 8;
            uint4 x = make_uint4(0u, 0u, 0u, 0u);
            if (r < nvalid && d < D) x = *(const uint4 *)(s + base + (long long)(row0 + r) * rs + d);
            *(uint4 *)(dst + r * LD + d) = x;
        }
    } else {
        for (int e = threadIdx.x; e < ROWS * DP; e += NT) {
            const int r = e / DP, d = e % DP;
            dst[r * LD + d] = (r < nvalid && d < D) ? s[base + (long long)(row0 + r) * rs + d] : (uint16_t)0;
        }
    }
}

/* K and V tiles of keys j0 .. j0 + ROWS - 1, and Q and dO tiles of queries i0 .. i0 + ROWS - 1,
 * of the slices sl, 16-bit as they are (tensor-core operands). */
template <int DP, int ROWS, int NT>
static __device__ __forceinline__ void cml__attn_load_kv(uint16_t *Ks, uint16_t *Vs, const cml__attn_params &p,
                                                         const cml__attn_slices &sl, int j0) {
    cml__attn_load_b16<DP, ROWS, NT>(Ks, p.K, sl.k, p.ks[1], j0, p.S_kv - j0, p.D, p.vec);
    cml__attn_load_b16<DP, ROWS, NT>(Vs, p.V, sl.v, p.vs[1], j0, p.S_kv - j0, p.D, p.vec);
}
template <int DP, int ROWS, int NT>
static __device__ __forceinline__ void cml__attn_load_qdo(uint16_t *Qs, uint16_t *dOs, const cml__attn_params &p,
                                                          const cml__attn_slices &sl, int i0) {
    cml__attn_load_b16<DP, ROWS, NT>(Qs, p.Q, sl.q, p.qs[1], i0, p.S_q - i0, p.D, p.vec);
    cml__attn_load_b16<DP, ROWS, NT>(dOs, p.dO, sl.o, p.os[1], i0, p.S_q - i0, p.D, p.vec);
}

/* Backward dkv: lse (exp2 domain) and Di of queries i0 .. i0 + ROWS - 1 into Ls, Dis (0 past S_q),
 * read by every key row of the block. */
template <int ROWS, int NT>
static __device__ __forceinline__ void cml__attn_load_lse_di(float *Ls, float *Dis, const cml__attn_params &p,
                                                             const cml__attn_slices &sl, int i0) {
    for (int q = threadIdx.x; q < ROWS; q += NT) {
        const bool ok = i0 + q < p.S_q;
        Ls[q] = ok ? p.lse[sl.row + i0 + q] * CML_ATTN_LOG2E : 0.0f;
        Dis[q] = ok ? p.Di[sl.row + i0 + q] : 0.0f;
    }
}

/* The head dim rounded up to a kernel size: 32, 64, 128 or 256 (0 beyond). */
static inline int cml__attn_dp(int64_t D) { return D <= 32 ? 32 : D <= 64 ? 64 : D <= 128 ? 128 : D <= 256 ? 256 : 0; }

#ifdef __cplusplus
extern "C" {
#endif
/* Validates what the CUDA kernels need beyond the public checks (D <= 256, sizes in
 * int) and fills the parameters; fn names the caller. */
cml_status cml__attn_params_init(const char *fn, const cml_ctx *ctx, const cml_attention_desc *d,
                                 cml__attn_params *p);
/* Parameters for a call (as above), the pointers' alignment folded into vec, and
 * ctx's device made current. */
cml_status cml__attn_setup(const char *fn, cml_ctx *ctx, const cml_attention_desc *d, cml__attn_params *p,
                           const void *const *ptrs, int n_ptrs);
/* Di = rowsum(dO * O) per (b, h, i) into the context's workspace (f32, B H_q S_q). */
cml_status cml__attn_bwd_prep(cml_ctx *ctx, cml__attn_params *p);
/* Grid of (B * H) x tiles, the tiles folded to at most 65535 (kernels stride over them). */
dim3 cml__attn_grid(long long bh, long long tiles);
#ifdef __cplusplus
}
#endif

#endif
