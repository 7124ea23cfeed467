/* Split work finished in the same kernel by the block that arrives last.
 *
 * Each block of a split publishes its partial result in global memory, then
 * counts itself in on the split's arrival counter (an integer atomic after a
 * threadfence: no float atomics). The block that takes the last ticket finds
 * every partial written, merges them in an order fixed by the shapes (never by
 * arrival), and sets the counter back to 0, so the counters can live in the
 * context's zeroed words (cml__cuda_zeroed) with no memset and no second kernel
 * per call. Which block merges depends on timing; what it computes does not. */
#ifndef CML_CUDA_LAST_ARRIVAL_CUH
#define CML_CUDA_LAST_ARRIVAL_CUH

/* Called by every thread of the block after the threads that publish a partial have stored
 * it. True in every thread of the block that arrived last (of `arrivals` on `counter`), which
 * may then read the other blocks' partials (through L2: __ldcg, since L1 is not coherent).
 * `flag` is a __shared__ int of the caller's. */
static __device__ __forceinline__ bool cml__block_arrives_last(unsigned *counter, unsigned arrivals, int *flag) {
    __threadfence(); /* release: this thread's partial is visible before the block's count */
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        const bool last = atomicAdd(counter, 1u) == arrivals - 1u;
        if (last) {
            *counter = 0u;
            __threadfence(); /* acquire: the others' partials are read after their counts */
        }
        *flag = last;
    }
    __syncthreads();
    return *flag != 0;
}

#endif
