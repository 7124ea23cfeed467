/* Harness for the Hopper attention backward (src/kernels/cuda/attention/attention_bwd_sm90.cuh):
 * the kernel variants of the README's "Backward" ladder, timed per launch (prep, main, convert),
 * checked bitwise against the first variant (the library's kernel), optionally with the phase
 * profile (variants with VAR & PROF: the SET=2 list).
 * One head dim per binary, -DHD=64 / 128 / 256 (D = 256: its own main kernel, the pair-K clusters of
 * attention_bwd_sm90_d256p.cuh), so that the device compiles them in parallel:
 *   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v -DHD=128 \
 *        dev/attention_sm90/bwd_harness.cu -lcuda -o build-att/bwd128
 *   bwd128 perf [S...]        every variant, S in {512, 2048, 8192} (default), full and causal
 *   bwd128 one S causal v     variant v alone (and the first, the reference)
 *   bwd128 edge               the check alone on awkward shapes: S_q != S_kv both ways (causal
 *                             query tiles that no key block touches), GQA, MQA, lengths 1 .. 4097,
 *                             a negative scale
 * Problem (perf): bf16, B*S = 16k tokens, hidden 2048 (H = 2048 / D), [B, S, H, D]; Q, K, V, dO
 * random in [-1, 1); O and lse from the sm90 forward. Every variant's dQ, dK, dV must equal the
 * first variant's bitwise (same key-block order of the dQ adds; different tile orders change
 * nothing in the sums), except UNORDERED (no order: relative difference printed). dQ, dK, dV are
 * poisoned (0xFF) before each variant's checked run. bwd TFLOP/s = 2.5 x forward flops over the
 * median of the summed prep + main + convert times.
 * Variants with cvt 1 / 2 (the library's convert launch, plain / PDL) are timed prep | main + convert
 * (no event between main and convert: it would end the overlap), printed as "main", convert 0.
 * -DSET=1 builds the exit-time variants instead (EXITT: CTA start / exit times, candidate 3's
 * measurement), -DSET=2 the phase profiles (PROF), so that the device compiles the sets in
 * parallel. */
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/status.h"
#include "kernels/cuda/attention/attention_bwd_sm90.cuh"
#if HD == 256
#include "kernels/cuda/attention/attention_bwd_sm90_d256p.cuh" /* D = 256: the pair-K kernel */
#endif

#ifndef HD
#define HD 128
#endif
#ifndef SET
#define SET 0
#endif

#define CK(x)                                                                                                      \
    do {                                                                                                           \
        cudaError_t e_ = (x);                                                                                      \
        if (e_ != cudaSuccess) {                                                                                   \
            printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                              \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

static int g_sms;
static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* ---- kernels of the harness ------------------------------------------------------------------ */

__global__ void fill_kernel(uint16_t *x, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
        float f = (float)(h >> 8) / 16777216.0f * 2.0f - 1.0f;
        uint32_t u = __float_as_uint(f);
        u += 0x7FFF + ((u >> 16) & 1);
        x[i] = (uint16_t)(u >> 16);
    }
}

/* x = -x (bf16 / f16: the sign bit): a negative scale's forward runs on -Q with |scale| */
__global__ void negate_kernel(uint16_t *x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] ^= 0x8000u;
}

/* Order-independent hash of n 32-bit words (position-weighted sum mod 2^64) and, against a
 * reference, sum (x - r)^2 and sum r^2 over the bf16 pairs. */
__global__ void hash_kernel(const uint32_t *x, const uint32_t *ref, size_t n, unsigned long long *h, double *err) {
    unsigned long long acc = 0;
    double num = 0, den = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        acc += (unsigned long long)x[i] * (i * 0x9E3779B97F4A7C15ull + 1);
        if (ref) {
            for (int k = 0; k < 2; k++) {
                const float a = __uint_as_float((k ? x[i] & 0xffff0000u : x[i] << 16));
                const float b = __uint_as_float((k ? ref[i] & 0xffff0000u : ref[i] << 16));
                num += (double)(a - b) * (a - b), den += (double)b * b;
            }
        }
    }
    atomicAdd(h, acc);
    if (ref) atomicAdd(&err[0], num), atomicAdd(&err[1], den);
}

/* ---- variants -------------------------------------------------------------------------------- */

enum { BM = HD == 64 ? 128 : 64 };
/* keys per work tile and dQ parts per query tile (D = 256: its own kernel, attention_bwd_sm90_d256p.cuh) */
enum { BNH = HD == 256 ? 64 : CML_ATT90B_BN, PARTS = HD == 256 ? 4 : 1 }; /* PARTS: dQ semaphores a query tile */
/* D = 256: work units are key-block pairs (the pair-K kernel), the convert reads 64 x 64 quarters */
enum { PAIRS = HD == 256 };

struct maps {
    CUtensorMap q, k, v, o, dO;
};

typedef void (*bwd_main_fn)(const maps &, const cml__att90b_params &, int grid);

template <int ST, int NDQ, int VAR>
static void launch_main(const maps &m, const cml__att90b_params &p, int grid) {
    typedef cml__att90b_smem<HD, BM, ST, NDQ> sm;
    static_assert(sm::total <= 232448, "shared memory");
    auto kern = cml__att90b_kernel<CML_ATT90_BF16, HD, BM, ST, NDQ, VAR>;
    static bool set;
    if (!set) {
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, sm::total));
        set = true;
    }
    kern<<<grid, CML_ATT90B_THREADS, sm::total>>>(m.q, m.k, m.v, m.dO, p);
}

/* Session 12: the library's ascending claims (p.asc: each head's key blocks longest first), launched
 * cooperatively as the library does (attention_bwd_sm90.cu); the bits must equal lib's. */
template <int ST, int NDQ, int VAR>
static void launch_main_asc(const maps &m, const cml__att90b_params &p0, int grid) {
    typedef cml__att90b_smem<HD, BM, ST, NDQ> sm;
    auto kern = cml__att90b_kernel<CML_ATT90_BF16, HD, BM, ST, NDQ, VAR>;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, sm::total));
    cml__att90b_params p = p0;
    p.asc = p.hshift == 0 && p.causal && p.n_kb <= grid;
    cudaLaunchConfig_t lc;
    memset(&lc, 0, sizeof lc);
    lc.gridDim = dim3(grid);
    lc.blockDim = dim3(CML_ATT90B_THREADS);
    lc.dynamicSmemBytes = sm::total;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeCooperative;
    at[0].val.cooperative = 1;
    lc.attrs = at;
    lc.numAttrs = 1;
    CK(cudaLaunchKernelEx(&lc, kern, m.q, m.k, m.v, m.dO, p));
}

#if HD == 256
/* D = 256, the library's pair-K kernel (attention_bwd_sm90_d256p.cuh): clusters of 2 CTAs, p.total_tiles =
 * units (key-block pairs x kv heads), as many clusters as fit at once (cudaOccupancyMaxActiveClusters) up to
 * the units; grid (CTAs) unused */
template <int VAR>
static void launch_pair256(const maps &m, const cml__att90b_params &p, int grid) {
    (void)grid;
    typedef cml__att90b256p_sm sm;
    static_assert(sm::total <= 232448, "shared memory");
    auto kern = cml__att90b256p_kernel<CML_ATT90_BF16, VAR>;
    cudaLaunchConfig_t lc;
    memset(&lc, 0, sizeof lc);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 2, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    lc.blockDim = dim3(CML_ATT90B_THREADS);
    lc.dynamicSmemBytes = sm::total;
    lc.attrs = at;
    lc.numAttrs = 1;
    static int max_clusters;
    if (!max_clusters) {
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, sm::total));
        lc.gridDim = dim3(2 * 66);
        CK(cudaOccupancyMaxActiveClusters(&max_clusters, kern, &lc));
        printf("pair-K kernel: %d clusters of 2 at once (%d bytes of shared memory)\n", max_clusters, (int)sm::total);
        if (max_clusters < 1) exit(1);
    }
    const int clusters = p.total_tiles < max_clusters ? p.total_tiles : max_clusters;
    lc.gridDim = dim3(2 * clusters);
    CK(cudaLaunchKernelEx(&lc, kern, m.q, m.k, m.v, m.dO, p));
}
#endif

typedef struct variant {
    const char *name;
    bwd_main_fn fn;
    int unordered, prof, hgroup, exitt;
    int cvt; /* the convert launch: 0 the harness's (grid <= 4096, an event between main and convert, timed
                alone), 1 the library's plain launch (one wave, no event between: main + convert timed
                together), 2 the library's programmatic dependent launch (WAIT kernel; session 8, part 2) */
    int chgroup; /* causal problems: kv heads interleaved (> 0 overrides hgroup there; 0: hgroup's rule) */
} variant;

/* the first variant, the reference, is the library's kernel (attention_bwd_sm90.cu's att90b_cfg:
 * VAR 0 at D = 64 and 256, EARLYREL at D = 128) */
#if HD == 64
#define LIB_ST 2
#define LIB_NDQ 1
#else
#define LIB_ST 2
#define LIB_NDQ 2
#endif
/* The library's main kernel twice in turns (the spread of one binary). Session 9 made the consumer
 * step's instruction diet the only code path at every D and D = 256's two dQ writers per buffer its
 * only one: the lists that compared them with the paths before (diet / decode / nomask / desc / stsm,
 * D = 256's lib / new / dq2w / dq2wp) are in git history at 60fa81e (D = 64 / 128) and 00b8e0c
 * (D = 256). SET=1: with EXITT (CTA start / exit times: the idle tail, plan candidate 3's
 * measurement); SET=2: with PROF (phase profile; at D = 256 the dQ writers' only: its consumers
 * record none before session 11); SET=3 (session 10, h10d): lib / unord in turns (the order's cost now; its spin
 * variant went in session 11); SET=7 (session 11): lib / unord with the consumers' phases. Session 11's writer
 * variants (prepoll, sleeps, wpair / wswap / wprod0, sempad: SETs 4, 5, 8-10) are in s11_prepoll.patch and
 * s11_writers.patch.
 * The session-8 candidates (FUSEDQ, QDWARP) and their lists are in s8_fusedq.patch;
 * earlier lists in git history (session 7: 475ee1f, c48252a). REPS=n: medians of n; CAUSAL=0 / 1:
 * perf without / with the mask only. */
#if HD == 128
enum { LIBV = CML_ATT90B_V_EARLYREL }; /* the library's VAR (attention_bwd_sm90.cu) */
#else
enum { LIBV = 0 };
#endif
#if HD == 256
#define LIB_MAIN(V) launch_pair256<LIBV | (V)>
#define LIB_HG -1 /* the library's D = 256 head interleave (see run_problem) */
#else
#define LIB_MAIN(V) launch_main<LIB_ST, LIB_NDQ, LIBV | (V)>
#define LIB_HG 0
#endif
#if HD == 256 && SET == 1
#error "the pair-K D = 256 kernel records no EXITT (CTA exit times): SET=1 is D = 64 / 128 only"
#endif
static const variant VARIANTS[] = {
#if SET == 1
    {"lib", LIB_MAIN(0), 0, 0, LIB_HG, 0},
    {"lib exit", LIB_MAIN(CML_ATT90B_V_EXITT), 0, 0, LIB_HG, 1},
#elif SET == 2
    {"lib", LIB_MAIN(0), 0, 0, LIB_HG, 0},
    {"lib prof", LIB_MAIN(CML_ATT90B_V_PROF), 0, 1, LIB_HG, 0},
#elif SET == 3
    /* session 10 (h10d): what the dQ key-block order costs NOW (h9b's unord was measured before D = 256's two
     * writers per buffer); unord adds without order: NOT deterministic, timing only */
    {"lib", LIB_MAIN(0), 0, 0, LIB_HG, 0},
    {"unord", LIB_MAIN(CML_ATT90B_V_UNORDERED), 1, 0, LIB_HG, 0},
    {"lib (2)", LIB_MAIN(0), 0, 0, LIB_HG, 0},
    {"unord (2)", LIB_MAIN(CML_ATT90B_V_UNORDERED), 1, 0, LIB_HG, 0},
#elif SET == 7
    /* session 11: the consumers' phases (D = 256 since session 11) with and without the dQ order */
    {"lib", LIB_MAIN(0), 0, 0, LIB_HG, 0},
    {"lib prof", LIB_MAIN(CML_ATT90B_V_PROF), 0, 1, LIB_HG, 0},
    {"unord prof", LIB_MAIN(CML_ATT90B_V_UNORDERED | CML_ATT90B_V_PROF), 1, 1, LIB_HG, 0},
#elif SET == 10 && HD != 256
    /* session 12: ascending claims (longest first) against descending, both with the library's PDL convert */
    {"lib", LIB_MAIN(0), 0, 0, LIB_HG, 0, 2, 0},
    {"asc", launch_main_asc<LIB_ST, LIB_NDQ, LIBV>, 0, 0, LIB_HG, 0, 2, 0},
    {"lib (2)", LIB_MAIN(0), 0, 0, LIB_HG, 0, 2, 0},
    {"asc (2)", launch_main_asc<LIB_ST, LIB_NDQ, LIBV>, 0, 0, LIB_HG, 0, 2, 0},
#else
    {"lib", LIB_MAIN(0), 0, 0, LIB_HG, 0, 0},
    {"lib (2)", LIB_MAIN(0), 0, 0, LIB_HG, 0, 0},
#endif
};
enum { N_VARIANTS = sizeof VARIANTS / sizeof VARIANTS[0] };

/* The library's convert launch (attention_bwd_sm90.cu, att90b_launch): one wave of 256-thread
 * blocks, plainly or as a programmatic dependent launch of the main kernel just launched. */
static void launch_convert(bool pdl, const float *acc, uint16_t *dq, const long long sq[3], int H, int Sq, int n_qt,
                           int causal, int off, float scale, long long n4, const int *sem, int *unit_counter,
                           int adders) {
    const long long want = n4 / 1024, cap = (long long)g_sms * 8;
    const unsigned cgrid = (unsigned)(want < cap ? want : cap);
    if (!pdl) {
        cml__att90b_dq_kernel<CML_ATT90_BF16, HD, BM, false, PAIRS><<<cgrid, 256>>>(
            (const float4 *)acc, dq, sq[0], sq[1], sq[2], H, Sq, n_qt, causal, off, scale, n4, NULL, NULL, 0);
        return;
    }
    cudaLaunchConfig_t lc;
    memset(&lc, 0, sizeof lc);
    lc.gridDim = dim3(cgrid);
    lc.blockDim = dim3(256);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    lc.attrs = at;
    lc.numAttrs = 1;
    CK(cudaLaunchKernelEx(&lc, cml__att90b_dq_kernel<CML_ATT90_BF16, HD, BM, true, PAIRS>, (const float4 *)acc, dq,
                          sq[0], sq[1], sq[2], H, Sq, n_qt, causal, off, scale, n4, sem, unit_counter, adders));
}

/* A 4-D map (D, H, S, B) as the library makes it (cml__att90_map). */
static void make_map(CUtensorMap *m, void *ptr, int B, int S, int H, int D, const long long st[3], int rows) {
    cuuint64_t dims[4] = {(cuuint64_t)D, (cuuint64_t)H, (cuuint64_t)S, (cuuint64_t)B};
    cuuint64_t strides[3] = {(cuuint64_t)(H > 1 ? st[2] : 8) * 2, (cuuint64_t)(S > 1 ? st[1] : 8) * 2,
                             (cuuint64_t)(B > 1 ? st[0] : 8) * 2};
    cuuint32_t box[4] = {64, 1, (cuuint32_t)rows, 1}, es[4] = {1, 1, 1, 1};
    CUresult r = cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, ptr, dims, strides, box, es,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        printf("encode failed %d\n", (int)r);
        exit(1);
    }
}

#if HD == 256 /* the pair-K consumers' laps (consumer 0 | consumer 1 where they differ; lap 7 adds the peer's dS^T) */
static const char *SLOT_NAMES[64] = {
    "q_full wait", "do wait", "S|dP wgmma", "P math|p_full wait", "p_empty wait|dS math", "P store+dO wait|ds_empty wait",
    "dV issue|dS store+dK issue", "ds_full wait", "dq issue+wait1", "wait0", "dq_empty wait", "dq store", "last rows",
    "-", "-", "-", "-", "steps", "-", "-",
};
#else
static const char *SLOT_NAMES[64] = {
    /* consumer */ "q_full wait", "kv_full wait", "bar G1", "S issue+dO wait", "dP issue", "G1 wgmma wait",
    "P/dS math", "ds_empty wait", "dS store", "bar G2", "G2 issue+ds_full", "G2 wgmma wait", "dq fence",
    "dq_empty wait", "dq store", "last dq", "tail+dKV", "steps", "dP wait (split)", "G2 tail wait (dqfirst)",
};
#endif

/* ---- one problem ------------------------------------------------------------------------------ */

typedef struct shape {
    int B, H, Hkv, Sq, Sk, causal, neg; /* neg: scale = -1 / sqrt(D) */
} shape;

static int run_problem(shape sh, int only_v, int reps) {
    const int D = HD, B = sh.B, H = sh.H, Hkv = sh.Hkv, Sq = sh.Sq, Sk = sh.Sk, causal = sh.causal;
    const long long sq[3] = {(long long)Sq * H * D, (long long)H * D, D};
    const long long sk[3] = {(long long)Sk * Hkv * D, (long long)Hkv * D, D};
    const size_t nq = (size_t)B * Sq * H * D, nk = (size_t)B * Sk * Hkv * D, nl = (size_t)B * H * Sq;
    uint16_t *q, *k, *v, *o, *dout, *dq, *dk, *dv, *ref[3];
    float *lse;
    CK(cudaMalloc(&q, nq * 2));
    CK(cudaMalloc(&k, nk * 2));
    CK(cudaMalloc(&v, nk * 2));
    CK(cudaMalloc(&o, nq * 2));
    CK(cudaMalloc(&dout, nq * 2));
    CK(cudaMalloc(&dq, nq * 2));
    CK(cudaMalloc(&dk, nk * 2));
    CK(cudaMalloc(&dv, nk * 2));
    CK(cudaMalloc(&ref[0], nq * 2));
    CK(cudaMalloc(&ref[1], nk * 2));
    CK(cudaMalloc(&ref[2], nk * 2));
    CK(cudaMalloc(&lse, nl * 4));
    static uint32_t seed = 1;
    fill_kernel<<<1024, 256>>>(q, nq, seed++ * 0x9E3779B9u);
    fill_kernel<<<1024, 256>>>(k, nk, seed++ * 0x9E3779B9u);
    fill_kernel<<<1024, 256>>>(v, nk, seed++ * 0x9E3779B9u);
    fill_kernel<<<1024, 256>>>(dout, nq, seed++ * 0x9E3779B9u);
    CK(cudaGetLastError());
    const float scale = (sh.neg ? -1.0f : 1.0f) / sqrtf((float)D);
    int *counter;
    CK(cudaMalloc(&counter, 4));
    /* The forward kernels take the row maximum on raw scores, so they need scale > 0 (the library
     * sends other scales elsewhere: attention_fwd_sm90.cu). scale (-Q) . k = |scale| (-Q) . k: a
     * negative scale's O and lse come from -Q with |scale|; the backward then runs on Q with scale. */
    const float fscale = fabsf(scale);
    if (sh.neg) negate_kernel<<<1024, 256>>>(q, nq);
#if HD == 256
    { /* forward: O, lse (the library's D = 256 configuration: one tile per CTA, BN 80, TMA-store epilogue) */
        typedef cml__att90_smem<256, 80, 2> fsm;
        auto fk = cml__att90_fwd_kernel<CML_ATT90_BF16, 256, 80, 2, 1, 1, 1>;
        CK(cudaFuncSetAttribute(fk, cudaFuncAttributeMaxDynamicSharedMemorySize, fsm::total));
        CUtensorMap mq, mk, mv, mo;
        make_map(&mq, q, B, Sq, H, D, sq, CML_ATT90_BM);
        make_map(&mk, k, B, Sk, Hkv, D, sk, 80);
        make_map(&mv, v, B, Sk, Hkv, D, sk, 80);
        make_map(&mo, o, B, Sq, H, D, sq, 64);
        cml__att90_params fp;
        memset(&fp, 0, sizeof fp);
        fp.Hq = H, fp.group = H / Hkv, fp.Sq = Sq, fp.Sk = Sk, fp.causal = causal;
        fp.q_tiles = (Sq + CML_ATT90_BM - 1) / CML_ATT90_BM;
        fp.scale_log2 = fscale * 1.4426950408889634f;
        fp.lse = lse;
        fp.O = o, fp.o_sb = sq[0], fp.o_ss = sq[1], fp.o_sh = sq[2];
        fp.total_tiles = fp.q_tiles * B * H;
        fk<<<fp.total_tiles, CML_ATT90_THREADS, fsm::total>>>(mq, mk, mv, mo, fp);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
    }
#else
    { /* forward: O, lse (the library's persistent configuration) */
        enum { FST = HD == 64 ? 4 : 2 };
        typedef cml__att90_psmem<HD, 128, FST, 1> fsm;
        auto fk = cml__att90_fwd_persistent_kernel<CML_ATT90_BF16, HD, 128, FST, 1>;
        CK(cudaFuncSetAttribute(fk, cudaFuncAttributeMaxDynamicSharedMemorySize, fsm::total));
        CUtensorMap mq, mk, mv, mo;
        make_map(&mq, q, B, Sq, H, D, sq, CML_ATT90_BM);
        make_map(&mk, k, B, Sk, Hkv, D, sk, 128);
        make_map(&mv, v, B, Sk, Hkv, D, sk, 128);
        make_map(&mo, o, B, Sq, H, D, sq, 64);
        cml__att90_params fp;
        memset(&fp, 0, sizeof fp);
        fp.Hq = H, fp.group = H / Hkv, fp.Sq = Sq, fp.Sk = Sk, fp.causal = causal;
        fp.q_tiles = (Sq + CML_ATT90_BM - 1) / CML_ATT90_BM;
        fp.scale_log2 = fscale * 1.4426950408889634f;
        fp.lse = lse;
        fp.O = o, fp.o_sb = sq[0], fp.o_ss = sq[1], fp.o_sh = sq[2];
        fp.total_tiles = fp.q_tiles * B * H;
        fp.tile_counter = counter;
        CK(cudaMemset(counter, 0, 4));
        fk<<<fp.total_tiles < g_sms ? fp.total_tiles : g_sms, CML_ATT90_THREADS, fsm::total>>>(mq, mk, mv, mo, fp);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
    }
#endif
    if (sh.neg) negate_kernel<<<1024, 256>>>(q, nq); /* Q back */
    maps m;
    make_map(&m.q, q, B, Sq, H, D, sq, BM);
    make_map(&m.k, k, B, Sk, Hkv, D, sk, BNH);
    make_map(&m.v, v, B, Sk, Hkv, D, sk, BNH);
    make_map(&m.dO, dout, B, Sq, H, D, sq, BM);
    cml__att90b_params p;
    memset(&p, 0, sizeof p);
    p.Hq = H, p.Hkv = Hkv, p.group = H / Hkv, p.Sq = Sq, p.Sk = Sk, p.causal = causal;
    p.n_qt = (Sq + BM - 1) / BM;
    p.n_kb = (Sk + BNH - 1) / BNH;
    p.total_tiles = B * Hkv * p.n_kb;
    p.scale = scale, p.scale_log2 = scale * 1.4426950408889634f;
    p.dK = dk, p.dV = dv;
    for (int i = 0; i < 3; i++) p.dk_s[i] = p.dv_s[i] = sk[i];
    const long long rows_pad = (long long)B * H * p.n_qt * BM, n_sem = (long long)B * H * p.n_qt * PARTS;
    float *lse2, *di, *acc;
    int *sem;
    CK(cudaMalloc(&lse2, rows_pad * 4));
    CK(cudaMalloc(&di, rows_pad * 4));
    CK(cudaMalloc(&acc, rows_pad * D * 4));
    CK(cudaMalloc(&sem, (n_sem + 2) * 4)); /* semaphores, tile counter, the convert's unit counter */
    p.lse2 = lse2, p.di = di, p.dq_acc = acc, p.dq_sem = sem, p.tile_counter = sem + n_sem;
    /* work units: key blocks (D = 256: pairs of them) and the adders the convert waits for */
    const int adders = PAIRS ? (p.n_kb + 1) / 2 : p.n_kb;
    p.total_tiles = B * Hkv * adders;
    unsigned long long *prof, *hbuf;
    double *ebuf;
    const int grid = p.total_tiles < g_sms ? p.total_tiles : g_sms;
    CK(cudaMalloc(&prof, (size_t)(grid > g_sms ? grid : g_sms) * 64 * 8));
    CK(cudaMalloc(&hbuf, 8));
    CK(cudaMalloc(&ebuf, 16));
    const unsigned pgrid = (unsigned)((rows_pad * 8 + 255) / 256 < 4096 ? (rows_pad * 8 + 255) / 256 : 4096);
    const long long n4 = rows_pad * D / 4;
    const unsigned cgrid = (unsigned)((n4 + 255) / 256 < 4096 ? (n4 + 255) / 256 : 4096);
    const double flop = 4.0 * B * H * (double)Sq * Sk * D * (causal ? 0.5 : 1.0);
    cudaEvent_t ev[4];
    for (int i = 0; i < 4; i++) cudaEventCreate(&ev[i]);
    unsigned long long hash_ref = 0;
    int fail = 0;
    char tag[96];
    snprintf(tag, sizeof tag, "D=%d S=%-5d %s", D, Sq, causal ? "causal" : "full  ");
    if (Sq != Sk || B * Sq != 16384 || sh.neg)
        snprintf(tag, sizeof tag, "D=%d B=%d H=%d/%d Sq=%d Sk=%d %s%s", D, B, H, Hkv, Sq, Sk, causal ? "causal" : "full",
                 sh.neg ? " scale<0" : "");
    for (int vi = 0; vi < N_VARIANTS; vi++) {
        const variant &var = VARIANTS[vi];
        if (only_v >= 0 && vi != only_v && vi != 0) continue;
        p.hshift = 0;
        /* 0: the library's D = 64 / 128 interleave; -1: the library's D = 256 interleave */
        const int hgroup = causal && var.chgroup > 0 ? var.chgroup
                           : var.hgroup > 0              ? var.hgroup
                           : causal       ? 1
                           : var.hgroup < 0 ? (p.n_kb <= 32 ? 4 : p.n_kb <= 64 ? 2 : 1)
                           : p.n_kb <= 16 ? 8
                                          : 4;
        while ((2 << p.hshift) <= hgroup && (B * Hkv) % (2 << p.hshift) == 0) p.hshift++;
        p.prof = var.prof || var.exitt ? prof : NULL;
        float *tp = (float *)malloc(reps * 4), *tm = (float *)malloc(reps * 4), *tc = (float *)malloc(reps * 4),
              *tt = (float *)malloc(reps * 4);
        const int runs = var.prof || var.exitt ? 2 : reps + 2;
        for (int r = 0; r < runs; r++) {
            const bool timed = !var.prof && !var.exitt && r >= 2;
            if (r == 0) {
                CK(cudaMemset(dq, 0xFF, nq * 2));
                CK(cudaMemset(dk, 0xFF, nk * 2));
                CK(cudaMemset(dv, 0xFF, nk * 2));
            }
            if ((var.prof || var.exitt) && r == 1) CK(cudaMemset(prof, 0, (size_t)grid * 64 * 8));
            cudaEventRecord(ev[0]);
            cml__att90b_prep_kernel<CML_ATT90_BF16, HD><<<pgrid, 256>>>(dout, o, sq[0], sq[1], sq[2], lse, H, Sq,
                                                                        p.n_qt * BM, rows_pad, lse2, di, sem, (int)n_sem);
            if (var.unordered) CK(cudaMemsetAsync(acc, 0, rows_pad * D * 4)); /* no first-adder store */
            cudaEventRecord(ev[1]);
            var.fn(m, p, grid);
            if (var.cvt == 0) {
                cudaEventRecord(ev[2]);
                cml__att90b_dq_kernel<CML_ATT90_BF16, HD, BM, false, PAIRS><<<cgrid, 256>>>(
                    (const float4 *)acc, dq, sq[0], sq[1], sq[2], H, Sq, p.n_qt, causal, Sk - Sq, scale, n4, NULL, NULL, 0);
            } else {
                launch_convert(var.cvt == 2, acc, dq, sq, H, Sq, p.n_qt, causal, Sk - Sq, scale, n4, sem, sem + n_sem + 1,
                               adders);
            }
            cudaEventRecord(ev[3]);
            CK(cudaEventSynchronize(ev[3]));
            CK(cudaGetLastError());
            if (timed) {
                cudaEventElapsedTime(&tp[r - 2], ev[0], ev[1]);
                if (var.cvt == 0) {
                    cudaEventElapsedTime(&tm[r - 2], ev[1], ev[2]);
                    cudaEventElapsedTime(&tc[r - 2], ev[2], ev[3]);
                } else { /* no event between main and convert (it would end the overlap): main = both */
                    cudaEventElapsedTime(&tm[r - 2], ev[1], ev[3]);
                    tc[r - 2] = 0.0f;
                }
                tt[r - 2] = tp[r - 2] + tm[r - 2] + tc[r - 2];
            }
            if (r == 0) { /* the check: bitwise against variant 0 (its first run is the reference) */
                unsigned long long hs = 0;
                double err[2] = {0, 0}, e3 = 0, ea;
                for (int a = 0; a < 3; a++) {
                    uint16_t *x = a == 0 ? dq : a == 1 ? dk : dv;
                    const size_t n = a == 0 ? nq : nk;
                    CK(cudaMemset(hbuf, 0, 8));
                    CK(cudaMemset(ebuf, 0, 16));
                    /* the reference against itself: err[0] is NaN iff it holds a NaN or an infinity */
                    hash_kernel<<<1024, 256>>>((const uint32_t *)x, (const uint32_t *)(vi == 0 ? x : ref[a]), n / 2,
                                               hbuf, ebuf);
                    unsigned long long h1;
                    CK(cudaMemcpy(&h1, hbuf, 8, cudaMemcpyDeviceToHost));
                    CK(cudaMemcpy(err, ebuf, 16, cudaMemcpyDeviceToHost));
                    hs = hs * 31 + h1;
                    if (vi > 0) ea = sqrt(err[0] / (err[1] > 0 ? err[1] : 1)), e3 = isnan(ea) || isnan(e3) ? NAN : fmax(e3, ea);
                    if (vi == 0) CK(cudaMemcpy(ref[a], x, n * 2, cudaMemcpyDeviceToDevice));
                    if (vi == 0 && isnan(err[0])) {
                        printf("%s %-14s check: DIFFERS: FAIL: %s holds NaN or infinity\n", tag, var.name, a == 0 ? "dQ" : a == 1 ? "dK" : "dV");
                        fail = 1;
                    }
                }
                if (vi == 0) hash_ref = hs;
                const bool same = hs == hash_ref;
                if (!same && !var.unordered) fail = 1;
                printf("%s %-14s check: %s (rel.diff %.1e)\n", tag, var.name,
                       same ? "bitwise equal" : var.unordered ? "differs (unordered)" : "DIFFERS: FAIL", e3);
            }
        }
        if (reps <= 0) {
        } else if (var.exitt) { /* CTA start (slot 60) and exit (61, 62: the consumers) times, ns */
            unsigned long long *h = (unsigned long long *)malloc((size_t)grid * 64 * 8);
            CK(cudaMemcpy(h, prof, (size_t)grid * 64 * 8, cudaMemcpyDeviceToHost));
            double t0 = 1e300, tend = 0, sum_exit = 0, smax = 0;
            float *ex = (float *)malloc(grid * 4);
            for (int c = 0; c < grid; c++) { /* a CTA exits with its later consumer */
                const double st0 = (double)h[c * 64 + 60], e = fmax((double)h[c * 64 + 61], (double)h[c * 64 + 62]);
                t0 = fmin(t0, st0), tend = fmax(tend, e), smax = fmax(smax, st0);
            }
            for (int c = 0; c < grid; c++) {
                const double e = fmax((double)h[c * 64 + 61], (double)h[c * 64 + 62]);
                ex[c] = (float)(e - t0), sum_exit += e - t0;
            }
            qsort(ex, grid, 4, cmp_float);
            const double span = tend - t0;
            printf("%s %-14s exits (us from the first CTA start; %d CTAs, starts within %.1f us): span %.1f, first "
                   "exit %.1f, 10%% %.1f, median %.1f, 90%% %.1f; idle tail (1 - mean exit / span) %.1f%%\n",
                   tag, var.name, grid, (smax - t0) / 1e3, span / 1e3, ex[0] / 1e3, ex[grid / 10] / 1e3, ex[grid / 2] / 1e3,
                   ex[grid * 9 / 10] / 1e3, 100.0 * (1.0 - sum_exit / grid / span));
            free(h), free(ex);
        } else if (!var.prof) {
            qsort(tp, reps, 4, cmp_float), qsort(tm, reps, 4, cmp_float), qsort(tc, reps, 4, cmp_float);
            qsort(tt, reps, 4, cmp_float);
            const double ms = tt[reps / 2];
            printf("%s %-14s | bwd %.3f ms %6.1f TF | prep %.3f main %.3f (%6.1f TF) convert %.3f\n", tag, var.name, ms,
                   2.5 * flop / ms / 1e9, tp[reps / 2], tm[reps / 2], 2.5 * flop / tm[reps / 2] / 1e9, tc[reps / 2]);
        } else {
            unsigned long long *h = (unsigned long long *)malloc((size_t)grid * 64 * 8), tot[64] = {0};
            CK(cudaMemcpy(h, prof, (size_t)grid * 64 * 8, cudaMemcpyDeviceToHost));
            for (int c = 0; c < grid; c++)
                for (int i = 0; i < 64; i++) tot[i] += h[c * 64 + i];
            printf("%s %-14s profile (cycles per step, summed over CTAs / steps):\n", tag, var.name);
            for (int c = 0; c < 2; c++) {
                const double steps = (double)tot[20 * c + 17];
                if (steps == 0) continue;
                double sum = 0;
                for (int i = 0; i < 20; i++) sum += i == 17 ? 0 : tot[20 * c + i];
                printf("  consumer %d (%.0f steps, %.0f cycles/step):", c, steps, sum / steps);
                for (int i = 0; i < 20; i++)
                    if (i != 17) printf(" [%s %.0f]", SLOT_NAMES[i], tot[20 * c + i] / steps);
                printf("\n");
            }
            for (int w = 0; w < 2; w++) {
                const double cnt = (double)tot[40 + 6 * w + 4];
                if (cnt == 0) continue;
                printf("  dq writer %d (%.0f partials): [full wait %.0f] [order wait %.0f] [add issue+read %.0f] "
                       "[add done+release %.0f]\n",
                       w, cnt, tot[40 + 6 * w] / cnt, tot[41 + 6 * w] / cnt, tot[42 + 6 * w] / cnt, tot[43 + 6 * w] / cnt);
            }
            const double tiles = (double)tot[59];
            if (tot[17] > 0)
                printf("  producer (%.0f tiles): [per tile: claim + last tile done %.0f] [per step: stage wait %.0f, "
                       "issue %.0f]\n",
                       tiles, tot[56] / tiles, tot[57] / (double)tot[17], tot[58] / (double)tot[17]);
            free(h);
        }
        free(tp), free(tm), free(tc), free(tt);
        fflush(stdout);
    }
    void *bufs[] = {q, k, v, o, dout, dq, dk, dv, lse, ref[0], ref[1], ref[2], lse2, di, acc, sem, prof, hbuf, ebuf, counter};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) CK(cudaFree(bufs[i]));
    for (int i = 0; i < 4; i++) cudaEventDestroy(ev[i]);
    return fail;
}

static shape perf_shape(int S, int causal) {
    const shape sh = {16384 / S, 2048 / HD, 2048 / HD, S, S, causal, 0};
    return sh;
}

int main(int argc, char **argv) {
    CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
    const char *mode = argc > 1 ? argv[1] : "perf";
    int fails = 0;
    if (!strcmp(mode, "perf")) {
        int Ss[8] = {512, 2048, 8192}, nS = 3;
        if (argc > 2) {
            nS = 0;
            for (int i = 2; i < argc && nS < 8; i++) Ss[nS++] = atoi(argv[i]);
        }
        const int reps = getenv("REPS") ? atoi(getenv("REPS")) : 10;
        const int only_c = getenv("CAUSAL") ? atoi(getenv("CAUSAL")) : -1; /* 0 / 1: full / causal only */
        for (int c = 0; c < 2; c++) {
            if (only_c >= 0 && c != only_c) continue;
            for (int i = 0; i < nS; i++) fails += run_problem(perf_shape(Ss[i], c), -1, reps);
        }
    } else if (!strcmp(mode, "one") && argc > 4) {
        fails += run_problem(perf_shape(atoi(argv[2]), atoi(argv[3])), atoi(argv[4]), 10);
    } else if (!strcmp(mode, "edge")) {
        /* B, H, H_kv, S_q, S_kv, causal, negative scale */
        static const shape edges[] = {
            {2, 4, 2, 1000, 300, 1, 0}, {2, 4, 2, 1000, 300, 1, 1}, {1, 2, 1, 300, 1000, 1, 0}, {2, 2, 2, 77, 77, 0, 0},
            {1, 8, 1, 4097, 4097, 1, 0}, {3, 2, 2, 1, 1, 1, 0},  {1, 4, 4, 129, 1025, 0, 1}, {2, 2, 1, 1000, 1000, 1, 1},
            {1, 2, 2, 513, 200, 0, 0},
        };
        /* EDGE_MAX=n: the first n shapes only (the sanitizer runs of run_s12a.sh) */
        size_t n_edges = sizeof edges / sizeof edges[0];
        if (getenv("EDGE_MAX") && (size_t)atoi(getenv("EDGE_MAX")) < n_edges) n_edges = (size_t)atoi(getenv("EDGE_MAX"));
        for (size_t i = 0; i < n_edges; i++) fails += run_problem(edges[i], -1, 0);
    } else {
        printf("usage: %s perf [S...] | one S causal variant | edge\n", argv[0]);
        return 2;
    }
    printf("%s: %d failures\n", argv[0], fails);
    return fails != 0;
}
