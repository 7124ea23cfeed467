/* Single-pass kernels for rows too long for one block: each block holds one
 * chunk of a row in registers, publishes the chunk's statistics, waits until
 * every chunk of its row has published, merges them in a fixed order (every
 * block of the row alike, so they agree bit for bit) and writes its chunk's
 * outputs from registers: the input is read once and the output written once,
 * where a two-pass scheme reads the input twice.
 *
 * Waiting on other blocks is safe only if they are sure to run. A block takes
 * its (row, chunk) from a ticket (an integer atomic) when it starts, not from
 * blockIdx, so tickets go out in the order blocks start and a row's chunks are
 * consecutive tickets. Every row whose tickets are all out completes, so at
 * most one row is partly started; its waiting blocks hold fewer SM slots than
 * the GPU has (the host checks 2 splits <= resident blocks), the rows before
 * it finish and free slots, and the rest of the row starts (the decoupled
 * look-back argument of single-pass scans). The results never depend on which
 * block got which ticket: the merge order is fixed by the chunk indices.
 *
 * Publishing: a chunk's state (at most 8 bytes) goes into its own 64-bit slot
 * with one relaxed (volatile) 64-bit store, then the row's counter is
 * decremented with a reduction (RED: fire and forget). The slots start as
 * all-ones (CML__ROW_SYNC_EMPTY, a pattern no state takes: the first word of a
 * state is a float whose NaNs are stored as the canonical NaN), so a slot
 * tells by itself whether it holds a state: no fence orders the store before
 * the counter, and a reader that finds the count complete but a slot still
 * empty polls that slot until it fills. One lane polls the counter (one
 * address per block, not one per chunk: 32 lanes polling 32 slots each loaded
 * L2 enough to cost 5-10% on the 256x262144 rows). The previous protocol
 * (store, __threadfence, a returning atomicAdd, poll, __threadfence) held
 * each block's SM slot for two more L2 round trips.
 * Merging: one warp of each block (cml__row_merge): lane l folds the states
 * l, l + 32, ... in order, then the 32 lane results go through a fixed
 * shfl-down tree, so a row of up to 32 chunks costs one L2 round trip (a
 * sequential merge by one thread, with its dependent loads, idled each
 * block's SM slot for microseconds after its last load).
 *
 * Workspace layout (cml__row_sync_bytes): the ticket in the first 256 bytes,
 * the row counters from byte 256, then rows x splits state slots; every byte
 * set to 0xFF before each launch (cml__row_sync_reset). The ticket and the
 * counters count down from 0xFFFFFFFF. */
#ifndef CML_KERNELS_CUDA_COMMON_ROW_SYNC_CUH
#define CML_KERNELS_CUDA_COMMON_ROW_SYNC_CUH

#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "kernels/cuda/common/block_reduce.cuh"
#include "kernels/cuda/common/launch.cuh"

#define CML__ROW_SYNC_EMPTY 0xFFFFFFFFFFFFFFFFull
#define CML__ROW_SYNC_COUNTS 64 /* the row counters start 64 words (256 bytes) into the workspace */

/* Byte offset of the state slots in the workspace (after the ticket and the row counters). */
static inline size_t cml__row_sync_slots_off(long long rows) {
    return 256 + ((size_t)rows * sizeof(unsigned) + 255) / 256 * 256;
}

/* Workspace bytes for rows x splits chunk states. */
static inline size_t cml__row_sync_bytes(long long rows, long long splits) {
    return cml__row_sync_slots_off(rows) + (size_t)rows * (size_t)splits * sizeof(unsigned long long);
}

/* The reset as a kernel: 8-byte words of all-ones, grid-stride. */
static __global__ void __launch_bounds__(256) cml__row_sync_reset_kernel(unsigned long long *ws, long long words) {
    cml__pdl_entry(); /* writes only once the kernel before (which may still use the workspace) has completed */
    for (long long i = blockIdx.x * 256ll + threadIdx.x; i < words; i += gridDim.x * 256ll) ws[i] = ~0ull;
}

/* Sets the ticket, the counters and every slot to all-ones, on the stream, before a launch. A kernel launched with
 * PDL (cml__launch), not cudaMemsetAsync: the memset cost each one-pass call ~2.3 us (LayerNorm bf16 256 x 262144 2.2%
 * slower with a second one: dev/membound/run_s21_memset.sh), and the kernel after a memset cannot start early. */
static inline cudaError_t cml__row_sync_reset(void *ws, long long rows, long long splits, cudaStream_t st) {
    const long long words = (long long)(cml__row_sync_bytes(rows, splits) / 8), blocks = (words + 255) / 256;
    return cml__launch(cml__row_sync_reset_kernel, dim3((unsigned)(blocks < 1024 ? blocks : 1024)), dim3(256), 0, st,
                       (unsigned long long *)ws, words);
}

/* The slots of a workspace for `rows` rows. */
static inline unsigned long long *cml__row_sync_slots(void *ws, long long rows) {
    return (unsigned long long *)((char *)ws + cml__row_sync_slots_off(rows));
}

/* Block-wide: this block's ticket (0, 1, ... in the order blocks start). */
static __device__ __forceinline__ unsigned cml__take_ticket(unsigned *sync) {
    __shared__ unsigned ticket;
    if (threadIdx.x == 0 && threadIdx.y == 0) ticket = 0xFFFFFFFFu - atomicSub(sync, 1u);
    __syncthreads();
    return ticket;
}

/* A state of at most 8 bytes (4-byte words, a float first) as a slot word, never EMPTY. */
template <typename S> static __device__ __forceinline__ unsigned long long cml__state_pack(const S &v) {
    static_assert(sizeof(S) <= 8 && sizeof(S) % 4 == 0, "states are one or two 4-byte words");
    unsigned w[2] = {0u, 0u};
    memcpy(w, &v, sizeof(S));
    if (__uint_as_float(w[0]) != __uint_as_float(w[0])) w[0] = 0x7FFFFFFFu; /* canonical NaN */
    return (unsigned long long)w[0] | ((unsigned long long)w[1] << 32);
}

template <typename S> static __device__ __forceinline__ S cml__state_unpack(unsigned long long u) {
    const unsigned w[2] = {(unsigned)u, (unsigned)(u >> 32)};
    S v;
    memcpy(&v, w, sizeof(S));
    return v;
}

/* Turns chunk k's published state into the merged type (here: itself). */
struct cml__state_same {
    template <typename S> __device__ __forceinline__ S operator()(S v, int) const { return v; }
};

/* Spins (with a back-off) until *p != bad; false after implausibly long (seconds). */
static __device__ __forceinline__ bool cml__spin_while_eq(const volatile unsigned long long *p, unsigned long long bad,
                                                          unsigned long long &v) {
    for (long long spins = 0; (v = *p) == bad; spins++) {
        if (spins > (1ll << 25)) return false;
        __nanosleep(64);
    }
    return true;
}

/* Warp 0 of the block (all 32 lanes), for row `row` with `splits` chunks: lane 0 publishes
 * `mine` as chunk `chunk` and counts it; lane 0 waits for the row's count, then every lane reads
 * its slots (chunks lane, lane + 32, ...; any still empty is polled until it fills), turns each
 * into an M with up(state, k) and folds them into `id` in order; then the lanes' results go
 * through the shfl-down tree. The merge is valid in lane 0. ok = false when the wait took
 * implausibly long (seconds): a broken co-residency assumption shows as NaN, not a hang. */
template <typename M, typename S, typename Up, typename Merge>
static __device__ __forceinline__ M cml__row_merge_up(unsigned *sync, unsigned long long *slots, long long row,
                                                      int chunk, int splits, const S &mine, M id, Up up, Merge merge,
                                                      bool &ok) {
    const int lane = threadIdx.x & 31;
    unsigned long long *rs = slots + row * (long long)splits;
    unsigned *count = sync + CML__ROW_SYNC_COUNTS + row;
    bool good = true;
    if (lane == 0) {
        *(volatile unsigned long long *)(rs + chunk) = cml__state_pack(mine);
        asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(count), "r"(0xFFFFFFFFu) : "memory"); /* -1 */
        const unsigned done = 0xFFFFFFFFu - (unsigned)splits;
        for (long long spins = 0; *(volatile unsigned *)count != done; spins++) {
            if (spins > (1ll << 25)) {
                good = false;
                break;
            }
            __nanosleep(64);
        }
    }
    __syncwarp();
    M a = id;
    for (int k = lane; k < splits; k += 32) {
        unsigned long long u;
        good = cml__spin_while_eq((volatile unsigned long long *)(rs + k), CML__ROW_SYNC_EMPTY, u) && good;
        a = merge(a, up(cml__state_unpack<S>(u), k));
    }
    ok = __all_sync(CML__FULL_MASK, good);
    for (int off = 16; off > 0; off >>= 1) {
        M o = cml__shfl_down_t(a, off);
        a = merge(a, o);
    }
    return a;
}

/* cml__row_merge_up in two halves, for a kernel that publishes a row's state and merges that row
 * later, after other work (norm_bwd_long.cuh's deferred dx: publish row r, merge row r - 1).
 * Lane 0 of the warp that merges publishes (any lane may call it; only lane 0 acts). */
template <typename S>
static __device__ __forceinline__ void cml__row_publish(unsigned *sync, unsigned long long *slots, long long row,
                                                        int chunk, int splits, const S &mine) {
    if ((threadIdx.x & 31) != 0) return;
    *(volatile unsigned long long *)(slots + row * (long long)splits + chunk) = cml__state_pack(mine);
    asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(sync + CML__ROW_SYNC_COUNTS + row),
                 "r"(0xFFFFFFFFu)
                 : "memory"); /* -1 */
}

/* The second half, by all 32 lanes of the warp whose lane 0 published: waits for the row's count,
 * folds the slots in the order of cml__row_merge_up (same states, same order: the same bits). */
template <typename S, typename Merge>
static __device__ __forceinline__ S cml__row_gather(unsigned *sync, unsigned long long *slots, long long row,
                                                    int splits, S id, Merge merge, bool &ok) {
    const int lane = threadIdx.x & 31;
    unsigned long long *rs = slots + row * (long long)splits;
    unsigned *count = sync + CML__ROW_SYNC_COUNTS + row;
    bool good = true;
    if (lane == 0) {
        const unsigned done = 0xFFFFFFFFu - (unsigned)splits;
        for (long long spins = 0; *(volatile unsigned *)count != done; spins++) {
            if (spins > (1ll << 25)) {
                good = false;
                break;
            }
            __nanosleep(64);
        }
    }
    __syncwarp();
    S a = id;
    for (int k = lane; k < splits; k += 32) {
        unsigned long long u;
        good = cml__spin_while_eq((volatile unsigned long long *)(rs + k), CML__ROW_SYNC_EMPTY, u) && good;
        a = merge(a, cml__state_unpack<S>(u));
    }
    ok = __all_sync(CML__FULL_MASK, good);
    for (int off = 16; off > 0; off >>= 1) {
        S o = cml__shfl_down_t(a, off);
        a = merge(a, o);
    }
    return a;
}

template <typename S, typename Merge>
static __device__ __forceinline__ S cml__row_merge(unsigned *sync, unsigned long long *slots, long long row, int chunk,
                                                   int splits, const S &mine, S id, Merge merge, bool &ok) {
    return cml__row_merge_up<S, S>(sync, slots, row, chunk, splits, mine, id, cml__state_same(), merge, ok);
}

/* Host: whether a one-pass launch of blocks_per_row chunks per row can make progress: every
 * block of a row must fit on the GPU at once (with room to spare). The environment variable
 * CML_DISABLE_ONEPASS_ROWS=1 turns the one-pass kernels off (the two-pass ones run instead),
 * for tests and A/B benchmarks. */
static inline bool cml__row_sync_fits(const void *kernel, int block, int blocks_per_row, int sms, size_t smem = 0) {
    static int disabled = -1;
    if (disabled < 0) {
        const char *e = getenv("CML_DISABLE_ONEPASS_ROWS");
        disabled = e && e[0] && e[0] != '0';
    }
    if (disabled) return false;
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, smem) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return per_sm > 0 && (long long)blocks_per_row * 2 <= (long long)per_sm * sms;
}

#endif
