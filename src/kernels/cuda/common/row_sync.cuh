/* Single-pass kernels for rows too long for one block: each block holds one
 * chunk of a row in registers, publishes the chunk's statistics, waits until
 * every chunk of its row has published, merges them in chunk order (every
 * block of the row alike, so they agree bit for bit) and writes its chunk's
 * outputs from registers: the input is read once and the output written once,
 * where a two-pass scheme reads the input twice.
 *
 * Waiting on other blocks is safe only if they are sure to run. A block takes
 * its (row, chunk) from a ticket (an integer atomicAdd) when it starts, not
 * from blockIdx, so tickets go out in the order blocks start and a row's chunks
 * are consecutive tickets. Every row whose tickets are all out completes, so at
 * most one row is partly started; its waiting blocks hold fewer SM slots than
 * the GPU has (the host checks splits <= resident blocks), the rows before it
 * finish and free slots, and the rest of the row starts (the decoupled
 * look-back argument of single-pass scans). The results never depend on which
 * block got which ticket: the merge order is the chunk order.
 *
 * Workspace layout: [ticket, counts[rows]] (zeroed before each launch), then
 * the states at CML__ROW_SYNC_STATES(rows). */
#ifndef CML_KERNELS_CUDA_COMMON_ROW_SYNC_CUH
#define CML_KERNELS_CUDA_COMMON_ROW_SYNC_CUH

#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

/* Byte offset of the chunk states in the workspace (after the ticket and counts). */
#define CML__ROW_SYNC_STATES(rows) ((((size_t)(rows) + 1) * sizeof(unsigned) + 255) / 256 * 256)

/* Block-wide: this block's ticket (0, 1, ... in the order blocks start). */
static __device__ __forceinline__ unsigned cml__take_ticket(unsigned *sync) {
    __shared__ unsigned ticket;
    if (threadIdx.x == 0 && threadIdx.y == 0) ticket = atomicAdd(sync, 1u);
    __syncthreads();
    return ticket;
}

/* One thread: stores the chunk's state, then counts it for the row (the fence orders the
 * two for other SMs). */
template <typename S>
static __device__ __forceinline__ void cml__publish(S *slot, const S &v, unsigned *sync, long long row) {
    *slot = v;
    __threadfence();
    atomicAdd(sync + 1 + row, 1u);
}

/* One thread: waits until all `splits` chunks of the row have published; false if that took
 * implausibly long (seconds), so that a broken assumption shows as NaN, not a hang. */
static __device__ __forceinline__ bool cml__wait_row(const unsigned *sync, long long row, unsigned splits) {
    const volatile unsigned *count = sync + 1 + row;
    for (long long spins = 0; *count < splits; spins++) {
        if (spins > (1ll << 25)) return false;
        __nanosleep(64);
    }
    __threadfence();
    return true;
}

/* A state another SM wrote, loaded past L1 (L1 is not coherent across SMs). */
template <typename S> static __device__ __forceinline__ S cml__load_cg(const S *p) {
    static_assert(sizeof(S) % 4 == 0, "states are made of 4-byte words");
    unsigned w[sizeof(S) / 4];
#pragma unroll
    for (int i = 0; i < (int)(sizeof(S) / 4); i++) w[i] = __ldcg((const unsigned *)p + i);
    S v;
    memcpy(&v, w, sizeof(S));
    return v;
}

/* Host: whether a one-pass launch of blocks_per_row chunks per row can make progress: every
 * block of a row must fit on the GPU at once (with room to spare). The environment variable
 * CML_DISABLE_ONEPASS_ROWS=1 turns the one-pass kernels off (the two-pass ones run instead),
 * for tests and A/B benchmarks. */
static inline bool cml__row_sync_fits(const void *kernel, int block, int blocks_per_row, int sms) {
    static int disabled = -1;
    if (disabled < 0) {
        const char *e = getenv("CML_DISABLE_ONEPASS_ROWS");
        disabled = e && e[0] && e[0] != '0';
    }
    if (disabled) return false;
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return per_sm > 0 && (long long)blocks_per_row * 2 <= (long long)per_sm * sms;
}

#endif
