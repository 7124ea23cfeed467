/* Moving rows between device memory and threads, for the row kernels
 * (softmax, cross-entropy, layernorm, reductions).
 *
 * Two ways:
 * - cml__row_load / cml__row_store keep a whole row in the registers of a row
 *   group (G threads, E elements each; see block_reduce.cuh), so a kernel reads
 *   its input once and writes its output once. With VEC (every row starts on a
 *   16-byte boundary, n a multiple of the elements per word) thread t owns the
 *   16-byte words t, t + G, ... and moves them with 16-byte accesses; otherwise
 *   it owns the elements t, t + G, ... (still coalesced across the group).
 * - cml__stream walks a range of a row (any length, any alignment): a scalar
 *   head up to the first 16-byte boundary, 16-byte words with UNROLL loads in
 *   flight per thread (enough bytes in flight to cover DRAM latency without
 *   needing full occupancy), then a scalar tail. */
#ifndef CML_KERNELS_CUDA_COMMON_ROWS_CUH
#define CML_KERNELS_CUDA_COMMON_ROWS_CUH

#include "kernels/cuda/common/block_reduce.cuh"

/* The column of element e of thread t in a row held by a group of G threads. */
template <int DT, bool VEC>
static __device__ __forceinline__ int cml__row_col(int e, int t, int G) {
    constexpr int V = cml__words<DT>::V;
    if constexpr (VEC) return ((e / V) * G + t) * V + e % V;
    else return e * G + t;
}

/* v[e] = row[col(e)], or pad past the row's n elements. */
template <int DT, bool VEC, int E>
static __device__ __forceinline__ void cml__row_load(float (&v)[E], const void *row, int n, int t, int G, float pad) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    if constexpr (VEC) {
        static_assert(E % V == 0, "a thread holds whole 16-byte words");
        uint4 w[E / V];
#pragma unroll
        for (int k = 0; k < E / V; k++) {
            const int c = (k * G + t) * V;
            w[k] = c < n ? __ldg((const uint4 *)((const T *)row + c)) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int k = 0; k < E / V; k++) {
            cml__unpack16<DT>(w[k], &v[k * V]);
            if ((k * G + t) * V >= n)
#pragma unroll
                for (int u = 0; u < V; u++) v[k * V + u] = pad;
        }
    } else {
#pragma unroll
        for (int e = 0; e < E; e++) {
            const int c = e * G + t;
            v[e] = c < n ? cml__to_f32<DT>(((const T *)row)[c]) : pad;
        }
    }
}

/* row[col(e)] = v[e] for the columns inside the row. FAST: 16-byte words packed by the hardware
 * (cml__pack16_fast: NaN as the canonical NaN), for kernel outputs. */
template <int DT, bool VEC, int E, bool FAST = false>
static __device__ __forceinline__ void cml__row_store(void *row, const float (&v)[E], int n, int t, int G) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    if constexpr (VEC) {
#pragma unroll
        for (int k = 0; k < E / V; k++) {
            const int c = (k * G + t) * V;
            if (c < n) {
                if constexpr (FAST) cml__st16((T *)row + c, cml__pack16_fast<DT>(&v[k * V]));
                else *(uint4 *)((T *)row + c) = cml__pack16<DT>(&v[k * V]);
            }
        }
    } else {
#pragma unroll
        for (int e = 0; e < E; e++) {
            const int c = e * G + t;
            if (c < n) ((T *)row)[c] = cml__from_f32<DT>(v[e]);
        }
    }
}

/* Whether rows of n elements starting at every pointer given can be moved as 16-byte words. */
static inline bool cml__rows_vec_ok(long long n, size_t elem_size, const void *a, const void *b, const void *c) {
    if ((n * (long long)elem_size) % 16 != 0) return false;
    return ((uintptr_t)a & 15u) == 0 && ((uintptr_t)b & 15u) == 0 && ((uintptr_t)c & 15u) == 0;
}

/* For j in [lo, hi) owned by thread t of nthr: x[k] = in_k[j] (NIN <= 3 inputs), r = f(x, j),
 * and out[j] = r when OUT. Inputs and output are buffers of dtype DT indexed from the
 * same base; they take the 16-byte path when equally misaligned, else the scalar one. */
template <int DT, int NIN, bool OUT, int UNROLL, typename F>
static __device__ __forceinline__ void cml__stream(void *out, const void *in0, const void *in1, long long lo,
                                                   long long hi, int t, int nthr, F f, const void *in2 = nullptr) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    static_assert(NIN >= 1 && NIN <= 3, "one to three inputs");
    const void *ins[3] = {in0, in1, in2};
    long long head = cml__head_len<DT>(in0, lo, hi - lo);
    bool same = true;
    if constexpr (NIN > 1) same = same && cml__head_len<DT>(in1, lo, hi - lo) == head;
    if constexpr (NIN > 2) same = same && cml__head_len<DT>(in2, lo, hi - lo) == head;
    if constexpr (OUT) same = same && cml__head_len<DT>(out, lo, hi - lo) == head;
    if (!same) head = hi - lo; /* all scalar */
    float x[NIN];
    for (long long j = lo + t; j < lo + head; j += nthr) {
#pragma unroll
        for (int k = 0; k < NIN; k++) x[k] = cml__ld<DT>(ins[k], j);
        const float r = f(x, j);
        if constexpr (OUT) cml__st<DT>(out, j, r);
    }
    const long long b0 = lo + head;
    const long long nw = (hi - b0) / V;
    for (long long i0 = t; i0 < nw; i0 += (long long)nthr * UNROLL) {
        uint4 buf[UNROLL][NIN];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const long long i = i0 + (long long)u * nthr;
#pragma unroll
            for (int k = 0; k < NIN; k++)
                buf[u][k] = i < nw ? __ldg((const uint4 *)((const T *)ins[k] + b0) + i) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const long long i = i0 + (long long)u * nthr;
            if (i >= nw) break;
            float v[NIN][V], r[V];
#pragma unroll
            for (int k = 0; k < NIN; k++) cml__unpack16<DT>(buf[u][k], v[k]);
#pragma unroll
            for (int e = 0; e < V; e++) {
#pragma unroll
                for (int k = 0; k < NIN; k++) x[k] = v[k][e];
                r[e] = f(x, b0 + i * V + e);
            }
            if constexpr (OUT) *((uint4 *)((T *)out + b0) + i) = cml__pack16<DT>(r);
        }
    }
    for (long long j = b0 + nw * V + t; j < hi; j += nthr) {
#pragma unroll
        for (int k = 0; k < NIN; k++) x[k] = cml__ld<DT>(ins[k], j);
        const float r = f(x, j);
        if constexpr (OUT) cml__st<DT>(out, j, r);
    }
}

/* Like cml__stream over one input, read only, but the 16-byte body goes to fw(v) one word
 * (V values, in index order) at a time, so that a state can be updated once per word (one
 * rescale of an online softmax, one Welford merge) rather than once per element, which
 * would chain a dependent update through every element. f1(x) gets the scalar head/tail. */
template <int DT, int UNROLL, typename F1, typename FW>
static __device__ __forceinline__ void cml__stream_words(const void *in, long long lo, long long hi, int t, int nthr,
                                                         F1 f1, FW fw) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    const long long head = cml__head_len<DT>(in, lo, hi - lo);
    for (long long j = lo + t; j < lo + head; j += nthr) f1(cml__ld<DT>(in, j));
    const long long b0 = lo + head;
    const long long nw = (hi - b0) / V;
    const uint4 *w = (const uint4 *)((const T *)in + b0);
    for (long long i0 = t; i0 < nw; i0 += (long long)nthr * UNROLL) {
        uint4 buf[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const long long i = i0 + (long long)u * nthr;
            buf[u] = i < nw ? __ldg(w + i) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (i0 + (long long)u * nthr >= nw) break;
            float v[V];
            cml__unpack16<DT>(buf[u], v);
            fw(v);
        }
    }
    for (long long j = b0 + nw * V + t; j < hi; j += nthr) f1(cml__ld<DT>(in, j));
}

/* A row held as KW raw 16-byte words per thread (thread t of a group of G owns words t,
 * t + G, ...; zero past the row's n elements). Keeping the words packed, rather than as
 * floats, halves the registers a bf16/f16 row takes, so more rows are in flight per SM. */
template <int DT, int KW>
static __device__ __forceinline__ void cml__words_load(uint4 (&w)[KW], const void *row, int n, int t, int G) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * G + t) * V;
        w[k] = c < n ? __ldg((const uint4 *)((const T *)row + c)) : make_uint4(0, 0, 0, 0);
    }
}

/* ---- launch geometry -------------------------------------------------------------------- */

/* The smallest power of two >= v (v >= 1), at most cap. */
static inline int cml__pow2_at_least(long long v, int cap) {
    int g = 1;
    while (g < cap && g < v) g *= 2;
    return g;
}

/* L2 size of a device in bytes (cached; 50 MB if it cannot be read). */
static inline long long cml__cuda_l2_bytes(int device) {
    static long long cached[64];
    if (device < 0 || device >= 64) return 50ll << 20;
    if (cached[device] == 0) {
        int v = 0;
        if (cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device) != cudaSuccess || v <= 0) {
            (void)cudaGetLastError();
            v = 50 << 20;
        }
        cached[device] = v;
    }
    return cached[device];
}

/* Register-row geometry of the packed-word kernels: KW words per thread (4 when the row fits in
 * 4 words x 512 threads, else 8), G threads per row (a power of two <= 1024), R rows per block
 * of max(G, 256) threads. Rows of 16384 f32 / 32768 bf16 thus take 512 threads x 8 words, not
 * 1024 x 4: two such blocks fit an SM (at <= 64 registers), so one block's load overlaps the
 * other's reductions and stores, where a single 1024-thread block left the SM idle between
 * its phases (bf16 softmax at 1024x32768: 53% of copy bandwidth). Returns false when the row
 * does not fit in 8 words x 1024 threads. */
static inline bool cml__words_geometry(long long n, size_t elem_size, int *KW, int *G, int *R) {
    const long long V = 16 / (long long)elem_size;
    if (n > 8 * V * 1024) return false;
    *KW = n <= 4 * V * 512 ? 4 : 8;
    *G = cml__pow2_at_least((n + *KW * V - 1) / (*KW * V), 1024);
    *R = *G >= 256 ? 1 : 256 / *G;
    return true;
}

#endif
