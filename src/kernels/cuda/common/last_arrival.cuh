/* Split work finished in the same kernel by the block that arrives last.
 *
 * Each block of a split publishes its partial result in global memory, then
 * counts itself in on the split's arrival counter (an integer atomic: no float
 * atomics). The block that takes the last ticket finds every partial written,
 * merges them in an order fixed by the shapes (never by arrival), and sets the
 * counter back to 0, so the counters can live in the context's zeroed words
 * (cml__cuda_zeroed) with no memset and no second kernel per call. Which block
 * merges depends on timing; what it computes does not. */
#ifndef CML_CUDA_LAST_ARRIVAL_CUH
#define CML_CUDA_LAST_ARRIVAL_CUH

/* Called by every thread of the block after the threads that publish a partial have stored
 * it. True in every thread of the block that arrived last (of `arrivals` on `counter`), which
 * may then read the other blocks' partials (through L2: __ldcg, since L1 is not coherent).
 * `flag` is a __shared__ int of the caller's.
 *
 * Only one thread fences (it used to be a fence.sc.gpu in every thread, each warp waiting for
 * all its earlier stores, the block's outputs included). Why that is enough, in the terms of
 * the PTX ISA's memory consistency model ("Memory Consistency Model" chapter: the sections
 * "Release and Acquire Patterns", "Observation Order" and "Causality Order"):
 * - publish: the partial stores of any thread of the block come before __syncthreads, whose
 *   barrier completion orders them before everything thread 0 does after it (base causality
 *   order: program order and barrier synchronization, at CTA scope). Thread 0's
 *   atom.release.gpu is a release pattern; release is cumulative, so every write that
 *   precedes it in causality order, the other threads' partials included, is ordered before
 *   the ticket for any thread that acquires it at gpu scope.
 * - merge: the last block's thread 0 read the ticket chain (each earlier block's release is
 *   observed through the sequence of atomic adds on the counter: "Observation Order"), and the
 *   acquire half of its atom.acq_rel completes the acquire pattern, so each releasing block's
 *   writes precede everything thread 0 does next in causality order; the second
 *   __syncthreads extends that to every thread of the block, whose loads of the partials
 *   then cannot return older values (the causality axiom).
 * One atom.acq_rel in every block rather than atom.release and, in the last block, a
 * fence.acq_rel.gpu after it: the acquire half of the atom is an L1 invalidate (CCTL.IVALL),
 * where the fence is a second MEMBAR.ALL.GPU (~0.7 us on this kernel's critical path, the last
 * block's merge: dev/gemm_sm90/cluster_launch_probe.cu measured a fence.acq_rel alone). */
static __device__ __forceinline__ bool cml__block_arrives_last(unsigned *counter, unsigned arrivals, int *flag) {
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        unsigned ticket;
        asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(ticket) : "l"(counter) : "memory");
        const bool last = ticket == arrivals - 1u;
        if (last) *counter = 0u;
        *flag = last;
    }
    __syncthreads();
    return *flag != 0;
}

#endif
