/* C-style device wrappers for the Hopper (sm_90a) machinery that the GEMM and
 * attention kernels share: mbarriers, TMA (bulk tensor) loads, wgmma fences
 * and shared-memory matrix descriptors, and register reallocation.
 *
 * Shared-memory addresses are 32-bit .shared::cta addresses (cml__smem_addr).
 * Every wrapper is a single PTX instruction (or a try-wait loop); the PTX ISA
 * reference describes each by the instruction name used here. */
#ifndef CML_KERNELS_CUDA_COMMON_HOPPER_CUH
#define CML_KERNELS_CUDA_COMMON_HOPPER_CUH

#include <cuda.h>
#include <stdint.h>

static __device__ __forceinline__ uint32_t cml__smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarrier -------------------------------------------------------------------------- */

static __device__ __forceinline__ void cml__mbar_init(uint64_t *bar, uint32_t arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(cml__smem_addr(bar)), "r"(arrivals) : "memory");
}

/* Makes initialized barriers visible to the async proxy (TMA) and the other threads;
 * follow it with __syncthreads(). */
static __device__ __forceinline__ void cml__mbar_init_fence(void) {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* One arrival that also announces `bytes` of TMA traffic the phase must wait for. The _at forms
 * of this and the wrappers below take the 32-bit shared address itself, so that a loop can
 * compute it once instead of converting a generic pointer on every use. */
static __device__ __forceinline__ void cml__mbar_arrive_expect_tx_at(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void cml__mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
    cml__mbar_arrive_expect_tx_at(cml__smem_addr(bar), bytes);
}

static __device__ __forceinline__ void cml__mbar_arrive_at(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
static __device__ __forceinline__ void cml__mbar_arrive(uint64_t *bar) { cml__mbar_arrive_at(cml__smem_addr(bar)); }

/* Waits until the barrier's phase with the given parity (0 or 1) has completed. A barrier
 * still in its first phase counts its (never run) previous phase, parity 1, as completed:
 * waiting for parity 1 on a fresh barrier returns at once (PTX ISA, mbarrier.test_wait). */
static __device__ __forceinline__ void cml__mbar_wait_at(uint32_t addr, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(addr), "r"(parity)
            : "memory");
    } while (!done);
}
static __device__ __forceinline__ void cml__mbar_wait(uint64_t *bar, uint32_t parity) {
    cml__mbar_wait_at(cml__smem_addr(bar), parity);
}

/* True in exactly one lane (the lowest active) of the warp; every lane of the warp must call it.
 * ptxas then knows that code under it runs in one lane: a TMA issued there needs no loop over
 * the active lanes (with `threadIdx.x == 0` it emits one around every cp.async.bulk.tensor). */
static __device__ __forceinline__ bool cml__elect_one(void) {
    uint32_t pred;
    asm volatile("{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}\n" : "=r"(pred));
    return pred != 0;
}

/* ---- clusters ------------------------------------------------------------------------------ */

static __device__ __forceinline__ uint32_t cml__cluster_rank(void) {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

/* Every thread of every CTA of the cluster; orders shared-memory writes before it (release)
 * with reads after it (acquire), cluster-wide. The release costs a MEMBAR.ALL.GPU: ~0.7 us in a
 * kernel launched with clusters (dev/gemm_sm90/cluster_launch_probe.cu, H100). */
static __device__ __forceinline__ void cml__cluster_sync(void) {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* The same meeting point without the release (no MEMBAR: ~free): for the start of a kernel whose
 * only cross-CTA data before it are mbarrier inits published by cml__mbar_init_fence. */
static __device__ __forceinline__ void cml__cluster_sync_relaxed(void) {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* Arrives on the barrier at the same shared-memory offset in the CTA of cluster rank `cta`
 * (release at CTA scope, as for a local arrive: enough to order this CTA's finished reads
 * of a stage before the peer's next copy into it; a cluster-scope release costs a fence). */
static __device__ __forceinline__ void cml__mbar_arrive_cluster_at(uint32_t bar, uint32_t cta) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(cta));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
static __device__ __forceinline__ void cml__mbar_arrive_cluster(uint64_t *bar, uint32_t cta) {
    cml__mbar_arrive_cluster_at(cml__smem_addr(bar), cta);
}

/* The shared::cluster address of a 32-bit shared::cta address in the CTA of cluster rank `cta`
 * (the same offset in its shared memory). */
static __device__ __forceinline__ uint32_t cml__mapa(uint32_t addr, uint32_t cta) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(cta));
    return remote;
}

/* A remote arrival with cluster-scope release: the arriving thread's earlier writes into the peer's
 * shared memory (cml__st_cluster) are visible to a thread that waits with cml__mbar_wait_cluster. */
static __device__ __forceinline__ void cml__mbar_arrive_cluster_rel_at(uint32_t bar, uint32_t cta) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(cml__mapa(bar, cta)) : "memory");
}

/* A remote arrival that also announces `bytes` of async traffic into the peer's phase (the bulk
 * copy below completes them): arrival and copy may reach the barrier in either order. CTA-scope
 * release (as cml__mbar_arrive_cluster_at): it publishes no data of its own (the copy's bytes are
 * the phase's tx), and a cluster-scope release costs a MEMBAR.ALL.GPU before every arrival. */
static __device__ __forceinline__ void cml__mbar_arrive_expect_tx_cluster_at(uint32_t bar, uint32_t cta,
                                                                             uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cluster.b64 _, [%0], %1;" ::"r"(
                     cml__mapa(bar, cta)),
                 "r"(bytes)
                 : "memory");
}

/* cml__mbar_wait with cluster-scope acquire (for phases completed by another CTA's release arrival). */
static __device__ __forceinline__ void cml__mbar_wait_cluster_at(uint32_t addr, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, "
            "0, p;\n}\n"
            : "=r"(done)
            : "r"(addr), "r"(parity)
            : "memory");
    } while (!done);
}

/* A 32-bit store into the shared memory of the CTA of cluster rank `cta` (addr: the local offset). */
static __device__ __forceinline__ void cml__st_cluster_u32(uint32_t addr, uint32_t cta, uint32_t v) {
    asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(cml__mapa(addr, cta)), "r"(v) : "memory");
}

/* bytes from this CTA's shared memory (src) to the same-offset-or-other buffer dst of the CTA of
 * cluster rank `cta`, completing (complete_tx bytes) on that CTA's barrier bar (dst, bar: local
 * offsets, mapped here). The writers of src must have run cml__fence_proxy_async_smem and
 * synchronized with the issuing thread; src is read once bar's phase has completed. */
static __device__ __forceinline__ void cml__bulk_copy_cluster_at(uint32_t dst, uint32_t src, uint32_t bytes,
                                                                 uint32_t bar, uint32_t cta) {
    asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     cml__mapa(dst, cta)),
                 "r"(src), "r"(bytes), "r"(cml__mapa(bar, cta))
                 : "memory");
}

/* ---- TMA: bulk tensor copies global -> shared, completing on an mbarrier --------------- */

/* Loads the box at coordinates (c0 innermost, c1, c2) of the tensor map into dst. */
static __device__ __forceinline__ void cml__tma_load_3d_at(uint32_t dst, const CUtensorMap *map, uint32_t bar, int c0,
                                                           int c1, int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::
            "r"(dst),
        "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}
static __device__ __forceinline__ void cml__tma_load_3d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0,
                                                        int c1, int c2) {
    cml__tma_load_3d_at(cml__smem_addr(dst), map, cml__smem_addr(bar), c0, c1, c2);
}

/* The same, delivered to the same shared-memory offset (and barrier) of every CTA of the
 * cluster named in cta_mask (bit i = cluster rank i). */
static __device__ __forceinline__ void cml__tma_load_3d_multicast_at(uint32_t dst, const CUtensorMap *map,
                                                                     uint32_t bar, int c0, int c1, int c2,
                                                                     uint16_t cta_mask) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(dst),
        "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(cta_mask)
        : "memory");
}
static __device__ __forceinline__ void cml__tma_load_3d_multicast(void *dst, const CUtensorMap *map, uint64_t *bar,
                                                                  int c0, int c1, int c2, uint16_t cta_mask) {
    cml__tma_load_3d_multicast_at(cml__smem_addr(dst), map, cml__smem_addr(bar), c0, c1, c2, cta_mask);
}

/* ---- TMA stores: shared -> global, tracked by bulk async-groups of the issuing thread ---- */

/* Stores src (laid out as the map's box, in its swizzle) to the box at (c0, c1, c2); elements
 * outside the tensor are not written. The threads that wrote src must have run
 * cml__fence_proxy_async_smem and synchronized with the issuing thread first. */
static __device__ __forceinline__ void cml__tma_store_3d(const CUtensorMap *map, const void *src, int c0, int c1,
                                                         int c2) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                     (uint64_t)map),
                 "r"(cml__smem_addr(src)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}

/* Closes the issuing thread's current group of bulk stores. */
static __device__ __forceinline__ void cml__bulk_commit(void) { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

/* Waits until at most N of this thread's store groups still read their shared-memory source. */
template <int N>
static __device__ __forceinline__ void cml__bulk_wait_read(void) {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/* Waits until at most N of this thread's store groups are incomplete (writes done). */
template <int N>
static __device__ __forceinline__ void cml__bulk_wait(void) {
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

/* Makes this thread's ordinary shared-memory writes visible to the async proxy (TMA stores). */
static __device__ __forceinline__ void cml__fence_proxy_async_smem(void) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* A 4-D bulk tensor load (see cml__tma_load_3d); attention maps (D, H, S, B) over [B, S, H, D] or [B, H, S, D]. */
static __device__ __forceinline__ void cml__tma_load_4d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0,
                                                        int c1, int c2, int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];" ::
            "r"(cml__smem_addr(dst)),
        "l"((uint64_t)map), "r"(cml__smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
        : "memory");
}

/* A 4-D bulk tensor store (see cml__tma_store_3d). */
static __device__ __forceinline__ void cml__tma_store_4d(const CUtensorMap *map, const void *src, int c0, int c1,
                                                         int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
                     (uint64_t)map),
                 "r"(cml__smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

/* ---- 1-D bulk copies (no tensor map): 16-byte aligned addresses, sizes multiples of 16 ---- */

/* global -> shared, completing (bytes) on bar like a TMA load. */
static __device__ __forceinline__ void cml__bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            cml__smem_addr(dst)),
        "l"((uint64_t)src), "r"(bytes), "r"(cml__smem_addr(bar))
        : "memory");
}

/* shared -> global store, tracked by the issuing thread's bulk async-groups (cml__bulk_commit). */
static __device__ __forceinline__ void cml__bulk_store(void *dst, const void *src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"((uint64_t)dst),
                 "r"(cml__smem_addr(src)), "r"(bytes)
                 : "memory");
}

/* dst[i] += src[i] for bytes / 4 floats (shared -> global, performed at L2 as reductions),
 * tracked like cml__bulk_store. */
static __device__ __forceinline__ void cml__bulk_reduce_add_f32(float *dst, const float *src, uint32_t bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"((uint64_t)dst),
                 "r"(cml__smem_addr(src)), "r"(bytes)
                 : "memory");
}

/* Orders this thread's generic-proxy global accesses with its async-proxy (bulk copy) ones. */
static __device__ __forceinline__ void cml__fence_proxy_async_global(void) {
    asm volatile("fence.proxy.async.global;" ::: "memory");
}

/* Brings a __grid_constant__ tensor map into the descriptor cache ahead of its first use. */
static __device__ __forceinline__ void cml__tma_prefetch_map(const CUtensorMap *map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"((uint64_t)map) : "memory");
}

/* Before the first TMA through a tensor map that lives in global memory and was written by a
 * copy (cudaMemcpy*), the issuing thread must acquire it for the tensormap proxy, or the TMA
 * unit may use a stale cached descriptor (CUDA programming guide, "Using TMA"); maps passed
 * as __grid_constant__ parameters need nothing. */
static __device__ __forceinline__ void cml__tma_map_acquire(const CUtensorMap *map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;" ::"l"((uint64_t)map) : "memory");
}

/* ---- wgmma ------------------------------------------------------------------------------- */

/* Orders this warpgroup's earlier register and shared-memory accesses before the wgmmas that follow. */
static __device__ __forceinline__ void cml__wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

static __device__ __forceinline__ void cml__wgmma_commit(void) {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* Waits until at most N committed wgmma groups of this warpgroup are still running. */
template <int N>
static __device__ __forceinline__ void cml__wgmma_wait(void) {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* Keeps the compiler from moving accumulator reads or writes across a wgmma fence or wait:
 * the registers look used and redefined here. */
template <int COUNT>
static __device__ __forceinline__ void cml__wgmma_reg_fence(float *d) {
#pragma unroll
    for (int i = 0; i < COUNT; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* A shared-memory matrix descriptor for a tile in the 128-byte swizzled layout that TMA
 * writes with CU_TENSOR_MAP_SWIZZLE_128B (each row 128 bytes, 8-row atoms of 1024 bytes,
 * tiles 1024-byte aligned). K-major operands: sbo = 1024 (the next 8 rows), lbo unused.
 * M/N-major operands: lbo = the distance between 64-element column blocks, sbo = 1024
 * (the next 8 K rows). */
static __device__ __forceinline__ uint64_t cml__wgmma_desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
    uint64_t d = (uint64_t)((smem_addr & 0x3FFFFu) >> 4);
    d |= (uint64_t)((lbo & 0x3FFFFu) >> 4) << 16;
    d |= (uint64_t)((sbo & 0x3FFFFu) >> 4) << 32;
    d |= (uint64_t)1 << 62; /* layout: 128-byte swizzle */
    return d;
}

/* ---- register reallocation between warpgroups ---------------------------------------------- */

template <int REGS>
static __device__ __forceinline__ void cml__regs_dealloc(void) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}

template <int REGS>
static __device__ __forceinline__ void cml__regs_alloc(void) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

#endif
