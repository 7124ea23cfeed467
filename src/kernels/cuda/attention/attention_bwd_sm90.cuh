/* The Hopper (sm_90a) flash-attention backward (issue 6), FlashAttention-3 style: 16-bit
 * Q, K, V, O, dO (bf16 or f16), head dim D = 64 or 128, any strides TMA accepts, causal
 * (bottom-right) or not, GQA, any sequence lengths. Host side: attention_bwd_sm90.cu. D = 256
 * has its own main kernel, in 2-CTA clusters (attention_bwd_sm90_d256p.cuh), around this file's
 * prep, convert and dQ writers.
 *
 * Three launches on the stream:
 *   prep:    per query row (padded to whole query tiles of BM rows): Di = rowsum(dO * O) and
 *            lse2 = lse * log2(e) (+inf for rows that see no key and for padding rows, so that
 *            P = exp2(s - lse2) = 0 there); zeroes the dQ semaphores, the tile counter and the
 *            convert kernel's unit counter;
 *   main:    one work tile = (batch, kv head, key block of BN = 128 keys), persistent CTAs of
 *            3 warpgroups:
 *     producer warp (setmaxnreg 24): claims tiles from a counter, loads K and V once per tile
 *       (TMA, 128-byte swizzle), then streams (Q, lse2) and (dO, Di) of query tiles of BM rows,
 *       for every query head of the group and every query tile the causal mask lets see the
 *       key block, through a ring of ST stages; each stage carries the step's description
 *       (semaphore index, first key, query tile, first / last step of the tile, mask: decoded
 *       here, so that the consumers' step has no division);
 *     consumers 0, 1 (setmaxnreg 240): 64 keys each, dK and dV (64 x D f32) in registers;
 *       per step: S^T = K Q^T and dP^T = V dO^T (wgmma, both operands in shared memory),
 *       P^T = exp2(S^T scale log2e - lse2), dS^T = P^T (dP^T - Di), dV += P^T dO and
 *       dK += dS^T Q (P^T, dS^T from registers as A operands, dO and Q N-major), dS^T to
 *       shared memory (16-bit, swizzled; two buffers by step parity, ds_full / ds_empty
 *       mbarriers), then the dQ partial of the query tile, dQ_part = dS K (BM x D f32, each
 *       consumer a 64 x 64 block: dS^T read M-major, K N-major), into a shared-memory buffer for
 *       the dQ writer. The dQ product of step k is issued in step k + 1 (with that step's dV, dK),
 *       so each consumer finds the other's half of dS^T long written: the two need not run in
 *       lockstep (a tile's last step does its own, before K is replaced). The stage is released
 *       after the step's last product (D = 128: as soon as dV and dK are done, before the dQ
 *       hand-off; VAR EARLYREL, attention_bwd_sm90.cu's att90b_cfg). Ping-pong (named
 *       barriers 1, 2): the consumers take turns issuing their S^T + dP^T and their dV + dK + dQ
 *       products, so one's exp / dS work runs under the other's products;
 *     dQ writers (one thread per dQ buffer; D = 256: two, taking turns): add each partial into a
 *       f32 accumulator in global memory (one bulk reduce-add; the first key block stores
 *       instead) in a FIXED order of key blocks.
 *   convert: dQ = scale * accumulator, to 16-bit in Q's layout; zeros for query tiles that no
 *            key block touches (causal rows that see no key). Launched as a programmatic
 *            dependent launch of main where it can be (attention_bwd_sm90.cu): its blocks then
 *            start on the SMs whose main CTA has exited and convert each query tile as soon as
 *            its semaphore says every key block has added (cml__att90b_dq_kernel, WAIT).
 *
 * Deterministic dQ. The key blocks that touch a query tile are a prefix 0 .. N_m of the kv
 * head's key blocks (non-causal: all; causal: key block n is seen by the queries
 * i >= n BN - (S_kv - S_q), a suffix, so a tile seen by block n is seen by every block before
 * it). They add in the FIXED order N_m, N_m - 1, ..., 0: block n's partial of query tile
 * (b, h, m) is added when the semaphore sem[b, h, m] (how many have added) equals its rank
 * N_m - n (rank 0 stores instead of adding); then the writer waits for the add to complete and
 * increments the semaphore (release). The float additions of every dQ element run in one order:
 * bitwise reproducible.
 * Why that order: every key block walks its query tiles upwards from the first it sees, so under
 * the causal mask block n + 1 (which sees fewer tiles) reaches tile m BN / BM steps before block
 * n does; adding in descending n, nobody waits for long (in ascending order, block n would wait at
 * its first tile until block 0 got there: every block of a head would take as long as block 0).
 * Forward progress: work tiles are numbered so that (g, n + 1) comes before (g, n) for every kv
 * head g = b H_kv + hk (key blocks descending; heads in groups of 2^hshift, interleaved inside a
 * group: cml__att90b_tile_pos), and every tile, the first too, is claimed from an
 * atomic counter, so each CTA holds tiles in increasing order and a claimed tile's CTA is
 * running (CTAs that never got onto an SM hold nothing). Take the lowest unfinished tile
 * T = (g, n): every lower tile is finished; T's CTA is working on T (its own earlier tiles are
 * lower, hence finished; tiles it claimed later only wait behind T inside the CTA); T waits only
 * on the semaphores of key blocks n + 1 .. N_m of its head, lower tiles, which have all added. So
 * T finishes, and by induction every tile does, whatever the grid size and co-residency.
 * Ascending claims (p.asc, causal with hshift 0, session 12; attention_bwd_sm90.cu's rule): under the causal mask
 * block 0 is a head's longest (it sees every query tile), and claimed last it ran alone at the
 * end of the kernel (~7% of the span with CTAs idle at S = 16k). With p.asc the tiles of a head
 * are numbered n = 0, 1, .. (the longest first); the walk, the ranks and so the bits are the same.
 * Now (g, n) waits on tiles claimed AFTER it, so progress needs three things: the launch is
 * cooperative (all CTAs resident, or it fails and the host launches descending instead), n_kb <=
 * the grid, and a CTA claims a tile only once every dQ add of its previous one is done
 * (cml__att90b_wait_added), so it holds at most one unfinished tile (else its earlier tile could
 * wait on its own later one, which its busy consumers never start). Take the lowest head g with an
 * unfinished tile: every earlier head's tiles are finished, and g's are claimed in ascending n. If
 * all of g's tiles are claimed, the highest unfinished one waits on nothing unfinished and
 * finishes. Else the counter stands inside g, and the CTAs holding an unfinished tile hold at most
 * the n_kb - 1 claimed ones, fewer than the grid: some CTA is free and claims g's next tile.
 * Either way g advances.
 * Masking by position only (keys past S_kv, the causal diagonal) on the tiles that need it; no
 * data-dependent branches: constant time per shape. */
#ifndef CML_KERNELS_CUDA_ATTENTION_ATTENTION_BWD_SM90_CUH
#define CML_KERNELS_CUDA_ATTENTION_ATTENTION_BWD_SM90_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/cuda/attention/attention_fwd_sm90.cuh"
#include "kernels/cuda/common/pdl.cuh"

#define CML_ATT90B_BN 128 /* keys per work tile: two consumers of 64 */
#define CML_ATT90B_THREADS 384
#define CML_ATT90B_PRODUCER_REGS 24 /* producer warp group: the TMA thread and the dQ writers */
#define CML_ATT90B_CONSUMER_REGS 240

typedef struct cml__att90b_params {
    int Hq, Hkv, group, Sq, Sk, causal;
    int n_qt;        /* query tiles per (b, h): ceil(Sq / BM) */
    int n_kb;        /* key blocks per (b, hk): ceil(Sk / BN) */
    int total_tiles; /* B * Hkv * n_kb */
    int hshift;      /* 2^hshift heads interleaved in the tile order (see cml__att90b_tile_pos) */
    int asc;         /* key blocks claimed ascending, longest first (hshift 0, cooperative launch: header) */
    float scale_log2, scale;
    const float *lse2; /* (B, Hq, n_qt BM) */
    const float *di;   /* (B, Hq, n_qt BM) */
    float *dq_acc;     /* (B, Hq, n_qt) tiles of BM x D floats in the consumers' fragment order */
    int *dq_sem;       /* (B, Hq, n_qt): key blocks that have added their dQ partial */
    int *tile_counter; /* zeroed by prep */
    void *dK, *dV;     /* element (b, s, h, d) at b s[0] + s s[1] + h s[2] + d */
    long long dk_s[3], dv_s[3];
    unsigned long long *prof; /* dev harness, VAR & CML_ATT90B_V_PROF: 64 cycle counters per CTA; else unused */
} cml__att90b_params;

/* Kernel variants for the dev harness (dev/attention_sm90/bwd_harness.cu); the library runs VAR = 0
 * at D = 64 and D = 256 and EARLYREL at D = 128 (attention_bwd_sm90.cu, att90b_cfg).
 *   PROF:      clock64 intervals of the phases of one thread per role, summed per CTA into p.prof;
 *   UNORDERED: dQ partials added with no key-block order (no semaphores): NOT deterministic, only
 *              to measure what the fixed order costs;
 *   EARLYREL:  (session 7) the Q / dO stage released as soon as dV and dK are done (not after the dQ
 *              hand-off), except on a tile's last step (K, V stay until its own dQ product);
 *   EXITT:     (session 8; D = 256 too since session 9) %globaltimer at CTA start and at each
 *              consumer's exit into p.prof[64 blockIdx + 60 .. 62]: how long SMs idle in the kernel's tail.
 * Measured and removed (dev/attention_sm90/README.md, session 11; patches s11_prepoll.patch, s11_writers.patch,
 * s11_dqsplit.patch, s11b_lpt128.patch): SPIN (relaxed polls without sleep: 1.11-1.21x slower), PREPOLL (the
 * writers' turn waited before the partial is ready), 64 / 256 ns poll sleeps, three placements of D = 256's
 * writer threads, semaphores on lines of their own, D = 256's dQ buffers in two pieces, the longest-first order
 * at D = 128 (h9c's, ported): none faster. PROF records D = 256's consumer phases too since session 11.
 * The consumer step's "instruction diet" (session 8, part 3; measured and made the only code path in
 * session 9, D = 256's kernel too, dev/attention_sm90/README.md): the producer hands each step
 * {semaphore index, j0, m, flags | mask} over (no runtime division in the consumers' step; (b, hk)
 * decoded once a tile, at its end); the P / dS math in an unmasked copy and a masked one, chosen by
 * the step's uniform mask flag; each wgmma descriptor's low word built once per operand base and
 * advanced by a constant (shared addresses < 2^18: the 14-bit start field never carries); dS^T
 * stored by stmatrix.x4 (the accumulator layout is stmatrix's).
 * Session 8 also measured the dQ conversion fused into the dQ writers (FUSEDQ) and a per-warp
 * stage release (QDWARP): both slower, kept as dev/attention_sm90/s8_fusedq.patch.
 * Session 7 also measured FlashAttention-3's intra-warpgroup overlap (S^T and dP^T as two groups,
 * the deferred dQ product first) and no ping-pong as variants here: none was faster
 * (dev/attention_sm90/README.md, session 7; their code is in git history at 475ee1f). */
enum {
    CML_ATT90B_V_PROF = 1,
    CML_ATT90B_V_UNORDERED = 2,
    CML_ATT90B_V_EARLYREL = 32,
    CML_ATT90B_V_EXITT = 256
};

/* Phase timer (VAR & PROF): lap(slot) adds the cycles since the last lap to counter slot. */
template <int VAR>
struct cml__att90b_prof {
    unsigned long long *p; /* this CTA's counters, NULL on threads that do not record */
    long long t;
    __device__ __forceinline__ void init(unsigned long long *base) {
        if (VAR & CML_ATT90B_V_PROF) p = base ? base + blockIdx.x * 64 : NULL, t = clock64();
    }
    __device__ __forceinline__ void lap(int slot) {
        if (VAR & CML_ATT90B_V_PROF) {
            const long long now = clock64();
            if (p) atomicAdd(p + slot, (unsigned long long)(now - t));
            t = now;
        }
    }
    __device__ __forceinline__ void count(int slot) {
        if ((VAR & CML_ATT90B_V_PROF) && p) atomicAdd(p + slot, 1ull);
    }
};

/* Dynamic shared memory: K, V (one tile), ST stages of Q and dO (+ lse2, Di), two dS^T buffers,
 * NDQ dQ partial buffers, step descriptions, barriers; 1024 bytes of alignment slack. */
template <int D, int BM, int ST, int NDQ>
struct cml__att90b_smem {
    enum {
        BN = CML_ATT90B_BN, /* keys per work tile (D = 256: its own layout, attention_bwd_sm90_d256p.cuh) */
        kv_bytes = CML_ATT90B_BN * D * 2,
        qd_bytes = BM * D * 2,
        ds_bytes = CML_ATT90B_BN * BM * 2,
        dq_bytes = BM * D * 4,
        off_k = 0,
        off_v = kv_bytes,
        off_q = 2 * kv_bytes,
        off_do = off_q + ST * qd_bytes,
        off_ds = off_do + ST * qd_bytes,
        off_dq = off_ds + 2 * ds_bytes,
        off_lse = off_dq + NDQ * dq_bytes,
        off_di = off_lse + ST * BM * 4,
        off_meta = off_di + ST * BM * 4,
        off_dqmeta = off_meta + ST * 16,
        off_last = off_dqmeta + NDQ * 16, /* the producer's last tile (p.asc; shared: no register for it) */
        off_bar = off_last + 16,
        n_bars = 1 + 3 * ST + 2 * NDQ + 4,
        total = 1024 + off_bar + 8 * n_bars
    };
};

/* A step description: int4 {semaphore index (b Hq + h) n_qt + m of the query tile, first key j0 of the
 * work tile, query tile m, flags}; flags: the tile's first / last step, MASK (the step needs the
 * mask: keys past S_kv or the causal diagonal), decoded by the producer, off the consumers' chain. */
enum { CML_ATT90B_FIRST = 1, CML_ATT90B_LAST = 2, CML_ATT90B_MASK = 4 };

/* Work tile -> (key block n, kv head g = b H_kv + hk). The kv heads go in groups of
 * 2^p.hshift (a divisor of B H_kv); inside a group the tiles are numbered key block major,
 * descending, head fastest: tile = (group n_kb + n_kb - 1 - n) 2^hshift + g % 2^hshift. So the
 * tile of (g, n + 1), the one (g, n) waits on, is numbered 2^hshift lower (see the header), and
 * consecutive claims go to different heads: tiles that start together do not wait on each other
 * (hshift = 0: head-major, the blocks of a head one after the other). p.asc (hshift 0 only):
 * ascending, tile = g n_kb + n (see the header). */
static __device__ __forceinline__ void cml__att90b_tile_pos(const cml__att90b_params &p, int tile, int &n, int &g) {
    const int u = tile >> p.hshift, grp = u / p.n_kb;
    n = p.asc ? u - grp * p.n_kb : p.n_kb - 1 - (u - grp * p.n_kb);
    g = grp << p.hshift | (tile & ((1 << p.hshift) - 1));
}

/* The rank of key block n among those that add to query tile m: the last key block that sees the
 * tile adds first (rank 0), key block 0 last. Causal: query rows up to i_last see key blocks
 * 0 .. (i_last + S_kv - S_q) / BN. */
template <int BM, int BN = CML_ATT90B_BN>
static __device__ __forceinline__ int cml__att90b_rank(const cml__att90b_params &p, int m, int n) {
    int last = p.n_kb - 1;
    if (p.causal) {
        const int i_last = ((m + 1) * BM < p.Sq ? (m + 1) * BM : p.Sq) - 1;
        const int seen = (i_last + p.Sk - p.Sq) / BN; /* >= n >= 0: block n sees the tile */
        last = seen < last ? seen : last;
    }
    return last - n;
}

/* The first query tile that sees keys from j0 on (causal: queries i >= j0 - (S_kv - S_q)). */
template <int BM>
static __device__ __forceinline__ int cml__att90b_first_qtile(const cml__att90b_params &p, int j0) {
    if (!p.causal) return 0;
    const int first = j0 - (p.Sk - p.Sq);
    return first > 0 ? first / BM : 0;
}

/* The query tile's position in its consumer: rows [mrow0, +64) and columns [ncol0, +64) of the
 * BM x D partial (BM * D = 8192: BM = 128 splits rows, BM = 64 splits the head dim). */
template <int D, int BM>
static __device__ __forceinline__ int cml__att90b_mrow0(int consumer) {
    return BM == 128 ? 64 * consumer : 0;
}
template <int D, int BM>
static __device__ __forceinline__ int cml__att90b_ncol0(int consumer) {
    return BM == 128 ? 0 : consumer * (D / 2);
}

static __device__ __forceinline__ int cml__att90b_ld_acquire(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void cml__att90b_red_release(int *p, int v) {
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

static __device__ __forceinline__ unsigned long long cml__att90b_globaltimer(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* ---- prep: Di, lse2, semaphores ------------------------------------------------------------ */

/* Rows of one prep work unit: 32 rows of 8 threads per block, each thread 2 rows at D = 64 (both
 * give every thread four 16-byte loads in flight; rows_per_bh, a multiple of 64, holds whole
 * units, so a unit is one (b, h)). */
template <int D>
struct cml__att90b_prep_cfg {
    enum { ROWS = D == 64 ? 2 : 1, UNIT = 32 * ROWS };
};

/* 8 threads per padded row (16-byte loads of dO and O, a fixed butterfly); a block of 256 takes a
 * unit of UNIT consecutive rows of one (b, h) per trip of its grid-stride loop: the (b, h, i)
 * division once per unit, in 32 bits (rows_pad <= INT_MAX: cml__attention_bwd_sm90_takes), and
 * every load of the unit issued before the first product (the old one-row-per-trip loop kept one
 * load per tensor in flight and paid two 64-bit divisions per row). Whole warps share each trip
 * (the shuffles). The products and the butterfly run in the order they always did: Di's bits do
 * not depend on the launch. */
template <int DT, int D>
static __global__ void __launch_bounds__(256, D == 256 ? 4 : 8) /* D = 256: 8 16-byte loads in flight, 64 registers */
    cml__att90b_prep_kernel(const uint16_t *dO, const uint16_t *O, long long os0, long long os1, long long os2,
                            const float *lse, int Hq, int Sq, int rows_per_bh, long long rows_pad, float *lse2,
                            float *di, int *sem, int n_sem) {
    typedef cml__att90b_prep_cfg<D> cfg;
    enum { R = cfg::ROWS, C = D / 64 }; /* rows per thread, 16-byte chunks per row and thread */
    const int sub = threadIdx.x % 8, r0 = threadIdx.x / 8;
    const int units_per_bh = rows_per_bh / cfg::UNIT, n_units = (int)(rows_pad / cfg::UNIT);
    const float inf = __int_as_float(0x7f800000);
    for (int unit = blockIdx.x; unit < n_units; unit += gridDim.x) {
        const int bh = unit / units_per_bh, b = bh / Hq, h = bh % Hq;
        const int i0 = (unit - bh * units_per_bh) * cfg::UNIT;
        uint4 x[R][C], y[R][C];
        float l[R];
#pragma unroll
        for (int k = 0; k < R; k++) {
            const int i = i0 + r0 + 32 * k;
            const long long off = b * os0 + (long long)i * os1 + h * os2 + sub * 8;
#pragma unroll
            for (int c = 0; c < C; c++) {
                x[k][c] = i < Sq ? __ldg((const uint4 *)(dO + off + 64 * c)) : make_uint4(0, 0, 0, 0);
                y[k][c] = i < Sq ? __ldg((const uint4 *)(O + off + 64 * c)) : make_uint4(0, 0, 0, 0);
            }
            l[k] = i < Sq && sub == 0 ? __ldg(lse + (long long)bh * Sq + i) : -inf;
        }
#pragma unroll
        for (int k = 0; k < R; k++) {
            const int i = i0 + r0 + 32 * k;
            float acc = 0.0f;
#pragma unroll
            for (int c = 0; c < C; c++) {
                const uint32_t xs[4] = {x[k][c].x, x[k][c].y, x[k][c].z, x[k][c].w};
                const uint32_t ys[4] = {y[k][c].x, y[k][c].y, y[k][c].z, y[k][c].w};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float x0, x1, y0, y1;
                    if (DT == CML_ATT90_F16) {
                        const float2 xf = __half22float2(*(const __half2 *)&xs[e]);
                        const float2 yf = __half22float2(*(const __half2 *)&ys[e]);
                        x0 = xf.x, x1 = xf.y, y0 = yf.x, y1 = yf.y;
                    } else {
                        x0 = __uint_as_float(xs[e] << 16), x1 = __uint_as_float(xs[e] & 0xffff0000u);
                        y0 = __uint_as_float(ys[e] << 16), y1 = __uint_as_float(ys[e] & 0xffff0000u);
                    }
                    acc = fmaf(x0, y0, acc);
                    acc = fmaf(x1, y1, acc);
                }
            }
            acc += __shfl_xor_sync(0xffffffffu, acc, 4);
            acc += __shfl_xor_sync(0xffffffffu, acc, 2);
            acc += __shfl_xor_sync(0xffffffffu, acc, 1);
            if (sub == 0) {
                const long long row = (long long)bh * rows_per_bh + i;
                di[row] = i < Sq ? acc : 0.0f;
                lse2[row] = l[k] == -inf ? inf : l[k] * 1.4426950408889634f;
            }
        }
    }
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x, nthr = (long long)gridDim.x * blockDim.x;
    /* n_sem semaphores, then the tile counter and the convert kernel's unit counter */
    for (long long k = tid; k < n_sem + 2LL; k += nthr) sem[k] = 0;
}

/* ---- convert: dQ = scale * accumulator ----------------------------------------------------- */

/* WAIT (programmatic dependent launch of the convert kernel): thread 0 of a block claims its next
 * work unit from a counter (prep zeroed it) while it converts the current one, then waits here
 * until that unit's accumulator part is complete: its semaphore (one per part, the dQ writers'
 * key-block order) has counted every key block that adds to the query tile; the unit goes to the
 * whole block through *slot. Units are claimed in order, and the main kernel completes the query
 * tiles in roughly that order (head groups one after the other; inside a group, key block 0
 * walks the query tiles upwards last), so blocks that started early on SMs the main kernel's
 * tail freed convert most of the tensor before it ends.
 * Memory order: the writer of a part's last partial waits for its bulk add to COMPLETE
 * (cp.async.bulk.wait_group 0, not .read), fences the async proxy against the generic one
 * (fence.proxy.async.global) and only then releases the semaphore (red.release.gpu,
 * cml__att90b_write_dq); thread 0 acquires it (ld.acquire.gpu) and the block barrier orders every
 * thread's plain loads of the part after that acquire. */
template <int D, int BM, bool QUART = false>
static __device__ __forceinline__ int cml__att90b_dq_ready(int unit, const int *sem, int n_units, int Sq, int n_qt,
                                                           int n_kb, int causal, int off, int *slot) {
    /* QUART (the dev pair-K D = 256 kernel, attention_bwd_sm90_d256p.cuh): one semaphore per unit (a
     * 64 x 64 quarter), counting key-block PAIRS (n_kb: pairs; 128 keys each) */
    enum { HALVES = D == 256 ? 2 : 1, BN = D == 256 && !QUART ? 64 : CML_ATT90B_BN };
    if (threadIdx.x == 0) {
        if (unit < n_units) {
            const int part = QUART ? unit : unit / 2, m = unit / 2 / HALVES % n_qt;
            const int i_last = (m * BM + BM < Sq ? m * BM + BM : Sq) - 1;
            /* key blocks 0 .. last add to the tile (cml__att90b_rank); none when causal rows see no key */
            int want = n_kb;
            if (causal) want = i_last + off < 0 ? 0 : (i_last + off) / BN + 1 < n_kb ? (i_last + off) / BN + 1 : n_kb;
            unsigned ns = 64;
            while (cml__att90b_ld_acquire(sem + part) < want) {
                __nanosleep(ns);
                ns = ns < 512 ? 2 * ns : ns;
            }
        }
        *slot = unit;
    }
    __syncthreads();
    return *slot;
}

/* A work unit is one consumer's 64 x 64 block of a query tile's accumulator (16 KB of f32 in the
 * consumers' fragment order: float4 q * 256 + c * 128 + t holds registers 4q..4q+3 of consumer
 * c's thread t, rows r, r + 8 and columns col, col + 1). A block of 256 threads reads it with
 * four fully coalesced 16-byte loads each, stages it as 16-bit values in shared memory in row
 * order, then writes 64 rows of 64 columns with 16-byte stores, 8 threads per 128-byte row (the
 * old kernel's 4-byte stores filled qpar of each 32-byte sector: ~1.3 TB/s). Staged rows are
 * 32 + 4 words apart: the fragment-order writes (8 rows x 4 words per warp) and the 16-byte row
 * reads (8 threads per row) hit 32 different banks. Zeros for query tiles that no key block
 * touches (causal rows that see no key; the accumulator was never written there). The products
 * and conversions are the old kernel's, element by element: the same bits.
 * D = 256 (BM = 64): a query tile's accumulator is two parts of 64 x 128 (columns 128 half ..),
 * each laid out like a D = 128 tile (block c = its columns 64 c ..); D = 64 / 128: one part.
 * WAIT = false: launched after the main kernel completed (plain stream order), units by grid
 * stride. WAIT = true: launched programmatically after the main kernel (which triggers at its
 * start), units claimed in order from unit_counter, each converted once its part is complete
 * (cml__att90b_dq_ready); sem, unit_counter and n_kb are unused otherwise. Forward progress: the
 * dependent launch happens only once every main CTA has started (each triggers first thing), so
 * a convert block only ever takes an SM a main CTA has left and waits only on main CTAs that are
 * running (whose progress needs nothing of the convert kernel: header), never on another convert
 * block. Each block ends at griddepcontrol.wait, so that the convert grid completes only after
 * the main kernel has: what follows on the stream (the next backward's prep zeroes the
 * semaphores, dK and dV are read) sees both complete. */
template <int DT, int D, int BM, bool WAIT = false, bool QUART = false>
static __global__ void __launch_bounds__(256, 8)
    cml__att90b_dq_kernel(const float4 *acc, uint16_t *dQ, long long qs0, long long qs1, long long qs2, int Hq,
                          int Sq, int n_qt, int causal, int off, float scale, long long n4, const int *sem,
                          int *unit_counter, int n_kb) {
    enum { P = 36, UNIT4 = 64 * 64 / 4, HALVES = D == 256 ? 2 : 1 }; /* staged row pitch in words; float4 per unit */
    __shared__ __align__(16) uint32_t stage[64 * P];
    __shared__ int next_unit;
    const int n_units = (int)(n4 / UNIT4); /* 2 per query tile */
    const int t = threadIdx.x % 128, qpar = threadIdx.x / 128, warp = t / 32, lane = t % 32;
    const int frow = 16 * warp + lane / 4, fword = lane % 4; /* this thread's fragment position */
    int claim = WAIT && threadIdx.x == 0 ? atomicAdd(unit_counter, 1) : 0; /* WAIT: thread 0's claims */
    int unit = WAIT ? cml__att90b_dq_ready<D, BM, QUART>(claim, sem, n_units, Sq, n_qt, n_kb, causal, off, &next_unit)
                    : (int)blockIdx.x;
    while (unit < n_units) {
        if (WAIT && threadIdx.x == 0) claim = atomicAdd(unit_counter, 1); /* the next, in flight under this one */
        const int part = unit / 2, c = unit % 2, tile = part / HALVES, half = part % HALVES;
        const int m = tile % n_qt, bh = tile / n_qt, b = bh / Hq, h = bh % Hq;
        const int i0 = m * BM + (HALVES == 2 ? 0 : cml__att90b_mrow0<D, BM>(c)), i_tile = m * BM;
        const int i_last = (i_tile + BM < Sq ? i_tile + BM : Sq) - 1;
        const bool touched = !causal || i_last + off >= 0; /* else no key block wrote the tile */
        /* QUART: each 64 x 64 unit contiguous (float4 q * 128 + t), units in column order */
        const float4 *src = QUART ? acc + (long long)unit * UNIT4 + t : acc + (long long)part * (BM * D / 4 / HALVES) + c * 128 + t;
        float4 v[4];
#pragma unroll
        for (int k = 0; k < 4; k++) /* q = 2k + qpar */
            v[k] = touched ? __ldcs(src + (2 * k + qpar) * (QUART ? 128 : 256)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        __syncthreads(); /* the previous unit's rows are read out */
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int w = 4 * (2 * k + qpar) + fword;
            stage[frow * P + w] = cml__att90_pack<DT>(v[k].x * scale, v[k].y * scale);
            stage[(frow + 8) * P + w] = cml__att90_pack<DT>(v[k].z * scale, v[k].w * scale);
        }
        __syncthreads();
        uint16_t *dst = dQ + b * qs0 + h * qs2 + (HALVES == 2 ? 128 * half + 64 * c : cml__att90b_ncol0<D, BM>(c));
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const int chunk = k * 256 + threadIdx.x, r = chunk / 8, cc = chunk % 8;
            if (i0 + r < Sq) *(uint4 *)(dst + (long long)(i0 + r) * qs1 + 8 * cc) = *(const uint4 *)&stage[r * P + 4 * cc];
        }
        /* WAIT: every thread read next_unit before the barriers above, so thread 0 may overwrite it */
        unit = WAIT ? cml__att90b_dq_ready<D, BM, QUART>(claim, sem, n_units, Sq, n_qt, n_kb, causal, off, &next_unit)
                    : unit + (int)gridDim.x;
    }
    if (WAIT) cml__pdl_wait();
}

/* ---- main kernel: the three roles ------------------------------------------------------------ */

/* p.asc: a CTA holds at most one tile whose dQ adds are not all done (the header's progress argument).
 * Waits until tile `tile`'s last partial through each dQ buffer has been added: its last NDQ steps
 * (each buffer's writer adds its partials in step order; steps alternate between the buffers). Its
 * steps run over the heads of its group, query tiles m_first .. n_qt - 1 each: the last is (last
 * head, n_qt - 1), the one before (last head, n_qt - 2) or, for one tile a head, (head before, n_qt - 1). */
template <int BM, int BN, int NDQ>
static __device__ __noinline__ void cml__att90b_wait_added(const cml__att90b_params &p, int tile) {
    int n, g;
    cml__att90b_tile_pos(p, tile, n, g);
    const int b = g / p.Hkv, hk = g % p.Hkv, m_first = cml__att90b_first_qtile<BM>(p, n * BN);
    const int last = (b * p.Hq + (hk + 1) * p.group - 1) * p.n_qt + p.n_qt - 1;
    for (int k = 0; k < NDQ; k++) {
        int idx = last, m = p.n_qt - 1;
        if (k == 1) {
            if (p.n_qt - 1 > m_first) idx = last - 1, m = p.n_qt - 2;
            else if (p.group > 1) idx = last - p.n_qt;
            else break; /* one step in all: the other buffer's last partial is an earlier tile's, added */
        }
        const int want = cml__att90b_rank<BM, BN>(p, m, n) + 1;
        while (cml__att90b_ld_acquire(p.dq_sem + idx) < want) __nanosleep(64);
    }
}

/* Producer (one thread): claims tiles, loads K, V per tile and (Q, lse2), (dO, Di) per step. */
template <int D, int BM, int ST, int NDQ, int VAR>
static __device__ __forceinline__ void cml__att90b_produce(const CUtensorMap *map_q, const CUtensorMap *map_k,
                                                           const CUtensorMap *map_v, const CUtensorMap *map_do,
                                                           const cml__att90b_params &p, uint8_t *smem) {
    typedef cml__att90b_smem<D, BM, ST, NDQ> sm;
    const int BN = sm::BN;
    uint64_t *bars = (uint64_t *)(smem + sm::off_bar);
    uint64_t *kv_full = bars, *q_full = bars + 1, *do_full = q_full + ST, *qd_empty = do_full + ST;
    int4 *meta = (int4 *)(smem + sm::off_meta);
    float *lse_s = (float *)(smem + sm::off_lse), *di_s = (float *)(smem + sm::off_di);
    cml__tma_prefetch_map(map_q);
    cml__tma_prefetch_map(map_k);
    cml__tma_prefetch_map(map_v);
    cml__tma_prefetch_map(map_do);
    int it = 0; /* steps so far: the stage ring's position */
    cml__att90b_prof<VAR> pf; /* slots 56..59: tile claim + previous tile done, stage waits, issue, tiles */
    pf.init(p.prof);
    volatile int *last_tile = (volatile int *)(smem + sm::off_last);
    for (;;) {
        pf.lap(58);
        if (p.asc && it > 0) cml__att90b_wait_added<BM, BN, NDQ>(p, *last_tile);
        const int tile = atomicAdd(p.tile_counter, 1);
        if (tile >= p.total_tiles) break;
        *last_tile = tile;
        int n, g;
        cml__att90b_tile_pos(p, tile, n, g);
        const int b = g / p.Hkv, hk = g % p.Hkv;
        const int j0 = n * BN, m_first = cml__att90b_first_qtile<BM>(p, j0);
        /* the last tile's K, V are read once its last step is done (which includes its dQ products) */
        if (it > 0) cml__mbar_wait(&qd_empty[(it - 1) % ST], ((it - 1) / ST) & 1);
        pf.lap(56);
        pf.count(59);
        cml__mbar_arrive_expect_tx(kv_full, 2 * sm::kv_bytes);
        cml__att90_load<D>(smem + sm::off_k, map_k, kv_full, j0, hk, b, BN);
        cml__att90_load<D>(smem + sm::off_v, map_v, kv_full, j0, hk, b, BN);
        /* every query head of the group, query tiles from m_first up: at least one step (see the
         * header); the first and last steps are flagged */
        const int h_end = (hk + 1) * p.group;
        int flags = CML_ATT90B_FIRST;
        for (int h = hk * p.group; h < h_end; h++) {
            for (int m = m_first; m < p.n_qt; m++, it++) {
                const int s = it % ST;
                pf.lap(58);
                if (it >= ST) cml__mbar_wait(&qd_empty[s], (it / ST - 1) & 1); /* step it - ST is done with it */
                pf.lap(57);
                if (h == h_end - 1 && m == p.n_qt - 1) flags |= CML_ATT90B_LAST;
                const int idx = (b * p.Hq + h) * p.n_qt + m, i0 = m * BM, off = p.Sk - p.Sq;
                const bool mask = j0 + BN > p.Sk || (p.causal && i0 < j0 + BN - 1 - off);
                meta[s] = make_int4(idx, j0, m, flags | (mask ? CML_ATT90B_MASK : 0));
                flags = 0;
                const int row = ((b * p.Hq + h) * p.n_qt + m) * BM; /* < 2^31: checked on the host */
                cml__mbar_arrive_expect_tx(&q_full[s], sm::qd_bytes + BM * 4); /* also publishes meta[s] */
                cml__att90_load<D>(smem + sm::off_q + s * sm::qd_bytes, map_q, &q_full[s], m * BM, h, b, BM);
                cml__bulk_load(lse_s + s * BM, p.lse2 + row, BM * 4, &q_full[s]);
                cml__mbar_arrive_expect_tx(&do_full[s], sm::qd_bytes + BM * 4);
                cml__att90_load<D>(smem + sm::off_do + s * sm::qd_bytes, map_do, &do_full[s], m * BM, h, b, BM);
                cml__bulk_load(di_s + s * BM, p.di + row, BM * 4, &do_full[s]);
            }
        }
    }
    /* no more work: a step with tile -1 through a plain arrival */
    const int s = it % ST;
    if (it >= ST) cml__mbar_wait(&qd_empty[s], (it / ST - 1) & 1);
    meta[s] = make_int4(-1, 0, 0, 0);
    cml__mbar_arrive(&q_full[s]);
}

/* dQ writer qb (one thread per dQ buffer, so that the adds of consecutive partials overlap): adds
 * the partials that pass through buffer qb into the accumulator, each in its key-block order.
 * D = 256 (attention_bwd_sm90_d256p.cuh): two writers per buffer, sub 0 taking partials 0, 2, 4 .., sub 1
 * partials 1, 3 .. of it, so that one waits for its add to complete (and releases the semaphore) while
 * the other already waits for the next partial's turn and reads it out: the consumer's next store no
 * longer waits behind the completion of the previous add (D = 256 has one buffer per consumer, no
 * second to fill meanwhile). The adds of each query tile keep their key-block order (the semaphores
 * decide it, not the writer): the same bits. Each partial is announced on its writer's own full barrier
 * (sub 0: dq_full[qb]; sub 1: the layout's last two barriers, n_bars - 2 + qb), so that each barrier's
 * phases are waited in order by one thread (a parity wait on a phase whose predecessor has not
 * completed would pass at once). dq_empty stays one barrier: its arrivals come in partial order (the
 * consumers store partial it + 1 only after the arrival for it). The end {-1} reaches one writer; it
 * completes the other's next phase itself (FULLN arrivals: the consumer warps' count), so that the
 * other reads {-1} too. */
template <int D, int BM, int ST, int NDQ, int VAR, int FULLN = 4, class SM = cml__att90b_smem<D, BM, ST, NDQ> >
static __device__ __forceinline__ void cml__att90b_write_dq(const cml__att90b_params &p, uint8_t *smem, int qb,
                                                            int sub = 0) {
    typedef SM sm; /* the layout (the dev pair-K D = 256 kernel passes its own: attention_bwd_sm90_d256p.cuh) */
    enum { NSUB = D == 256 ? 2 : 1 };
    uint64_t *dq_full = (uint64_t *)(smem + sm::off_bar) + 1 + 3 * ST, *dq_empty = dq_full + NDQ;
    uint64_t *full2 = (uint64_t *)(smem + sm::off_bar) + sm::n_bars - 2 + qb; /* D = 256: sub 1's full barrier */
    uint64_t *my_full = NSUB == 2 && sub ? full2 : &dq_full[qb];
    const int4 *dq_meta = (const int4 *)(smem + sm::off_dqmeta);
    cml__att90b_prof<VAR> pf;
    pf.init(p.prof);
    const int ps = 40 + 6 * qb; /* profile slots: full wait, order wait, add issue + read, add done, count */
    for (int j = 0;; j++) { /* this writer's j-th partial of buffer qb: partial NSUB j + sub */
        cml__mbar_wait(my_full, j & 1); /* the consumers' next partial is in buffer qb */
        const int4 mt = dq_meta[qb]; /* {semaphore index, rank, -, -} or {-1} */
        if (mt.x < 0) {
            if (NSUB == 2) { /* the end, passed on to the other writer of buffer qb (see above) */
                uint64_t *other = sub ? &dq_full[qb] : full2;
                for (int k = 0; k < FULLN; k++) cml__mbar_arrive(other);
            }
            break;
        }
        pf.lap(ps);
        int *sem = p.dq_sem + mt.x;
        float *dst = p.dq_acc + (long long)mt.x * (sm::dq_bytes / 4); /* one partial per semaphore */
        const float *src = (const float *)(smem + sm::off_dq + qb * sm::dq_bytes);
        if (VAR & CML_ATT90B_V_UNORDERED) { /* dev only: the accumulator was zeroed; adds in any order */
            cml__fence_proxy_async_global();
            cml__bulk_reduce_add_f32(dst, src, sm::dq_bytes);
            cml__bulk_commit();
            cml__bulk_wait_read<0>();
            cml__mbar_arrive(&dq_empty[qb]);
            continue;
        }
        while (cml__att90b_ld_acquire(sem) != mt.y) __nanosleep(32); /* key blocks 0 .. rank-1 have added */
        pf.lap(ps + 1);
        cml__fence_proxy_async_global();
        if (mt.y == 0) cml__bulk_store(dst, src, sm::dq_bytes);
        else cml__bulk_reduce_add_f32(dst, src, sm::dq_bytes);
        cml__bulk_commit();
        cml__bulk_wait_read<0>();
        cml__mbar_arrive(&dq_empty[qb]); /* the buffer may be refilled */
        pf.lap(ps + 2);
        cml__bulk_wait<0>();             /* the add is done ... */
        cml__fence_proxy_async_global();
        cml__att90b_red_release(sem, 1); /* ... before the next key block may add */
        pf.lap(ps + 3);
        pf.count(ps + 4);
    }
    cml__bulk_wait<0>();
}

/* A wgmma descriptor's low word (start address >> 4 | leading byte offset >> 4 << 16) for an operand
 * base, built once, and the descriptor of base + off from it: the bits of cml__wgmma_desc(base + off,
 * lbo, 1024), since base + off < 2^18 (a shared address) never carries out of the 14-bit start
 * field. The per-wgmma work is one add of a constant (the high word is a constant). */
static __device__ __forceinline__ uint32_t cml__att90b_desc_lo(uint32_t addr, uint32_t lbo) {
    return (uint32_t)cml__wgmma_desc(addr, lbo, 1024);
}
static __device__ __forceinline__ uint64_t cml__att90b_desc_at(uint32_t lo, uint32_t off) {
    return (cml__wgmma_desc(0, 0, 1024) & 0xFFFFFFFF00000000ull) | (uint64_t)(lo + (off >> 4));
}

/* The consumers' products, operands by descriptor low word (cml__att90b_desc_lo of the base address;
 * leading byte offsets 16 (nt), BM 128 (rs), BN 128 (dq)):
 * nt: acc (64 x N) = A B^T over the head dim, both K-major in shared memory: a_lo the consumer's 64
 *     rows of a tile of A_ROWS rows, b_lo a tile of N rows (D / 64 column blocks each);
 * rs: acc (64 x D) += A B over BM queries: A from registers (a[4 kk .. 4 kk + 3] per 16 queries, the
 *     accumulator layout of a 64 x BM tile), B (BM x D) N-major in shared memory;
 * dq: dQ block (64 x 64) = dS K over the BN keys: dS^T (BN x BM, keys as rows) read M-major, K (BN x D)
 *     N-major; a_lo / b_lo the consumer's column block of each. */
template <int DT, int D, int N, int A_ROWS>
static __device__ __forceinline__ void cml__att90b_mma_nt_lo(float *acc, uint32_t a_lo, uint32_t b_lo) {
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const uint32_t in_block = (kk % 4) * 32;
        const uint64_t da = cml__att90b_desc_at(a_lo, (kk / 4) * A_ROWS * 128 + in_block);
        const uint64_t db = cml__att90b_desc_at(b_lo, (kk / 4) * N * 128 + in_block);
        cml__att90_mma_ss<DT, N>(acc, da, db, kk > 0);
    }
}
template <int DT, int D, int BM>
static __device__ __forceinline__ void cml__att90b_mma_rs_lo(float *acc, const uint32_t *a, uint32_t b_lo) {
#pragma unroll
    for (int kk = 0; kk < BM / 16; kk++) {
        const uint32_t ak[4] = {a[4 * kk], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3]};
        cml__att90_mma_rs<DT, D>(acc, ak, cml__att90b_desc_at(b_lo, kk * 16 * 128));
    }
}
template <int DT>
static __device__ __forceinline__ void cml__att90b_mma_dq_lo(float *acc, uint32_t a_lo, uint32_t b_lo) {
#pragma unroll
    for (int kk = 0; kk < CML_ATT90B_BN / 16; kk++) {
        const uint64_t da = cml__att90b_desc_at(a_lo, kk * 16 * 128), db = cml__att90b_desc_at(b_lo, kk * 16 * 128);
        if (DT == CML_ATT90_BF16) cml__wgmma_m64n64k16_bf16<1, 1>(acc, da, db, kk > 0);
        else cml__wgmma_m64n64k16_f16<1, 1>(acc, da, db, kk > 0);
    }
}

/* P^T and dS^T from S^T, dP^T (accumulator layout: register 4q + 2r + e is key row r (a or b)
 * of the thread, query column 8q + 2 (lane % 4) + e), as 16-bit A fragments pa, ds. */
template <int DT, int BM, int MASKED> /* 1: keys past Sk and above the causal diagonal zeroed; 0: no mask */
static __device__ __forceinline__ void cml__att90b_p_ds(uint32_t *pa, uint32_t *ds, float *st, float *dpt,
                                                        const float *lse_s, const float *di_s, int key_a, int qcol0,
                                                        int Sk, int causal, int off, float scale_log2) {
#pragma unroll
    for (int q = 0; q < BM / 8; q++) {
        const int col = 8 * q + qcol0;
        const float2 l2 = *(const float2 *)(lse_s + col), dd = *(const float2 *)(di_s + col);
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int idx = 4 * q + 2 * r + e;
                float pv = cml__att90_ex2(fmaf(st[idx], scale_log2, -(e ? l2.y : l2.x)));
                if (MASKED) {
                    /* positions relative to the query tile's first row i0 (key_a and Sk come shifted) */
                    const int key = key_a + 8 * r, qi = col + e;
                    if (key >= Sk || (causal && key > qi + off)) pv = 0.0f;
                }
                st[idx] = pv;
                dpt[idx] = pv * (dpt[idx] - (e ? dd.y : dd.x));
            }
        pa[2 * q] = cml__att90_pack<DT>(st[4 * q], st[4 * q + 1]);
        pa[2 * q + 1] = cml__att90_pack<DT>(st[4 * q + 2], st[4 * q + 3]);
        ds[2 * q] = cml__att90_pack<DT>(dpt[4 * q], dpt[4 * q + 1]);
        ds[2 * q + 1] = cml__att90_pack<DT>(dpt[4 * q + 2], dpt[4 * q + 3]);
    }
}

/* dS^T rows key_loc, key_loc + 8 of the tile (BN rows, BM / 64 column blocks) by stmatrix.x4, one per
 * 16 query columns (a quarter of the STS.32 one per register would take; 128-byte swizzle: 16-byte
 * chunk c of row j at chunk c ^ (j % 8)). ds[2q], ds[2q + 1] are the 8 x 8 blocks (rows key0 ..
 * key0 + 7 resp. + 8 .. + 15, key0 = key_loc - lane / 4, columns 8q ..) in stmatrix's fragment
 * layout (row lane / 4, columns 2 (lane % 4), + 1); lane t gives the row address of block t / 8 of
 * the four (q, q + 1 with q even: one 16-byte chunk each; chunk (q % 8 + t / 16) ^ (row % 8) =
 * (q % 8) ^ (t / 16 ^ t % 8)). */
template <int BM>
static __device__ __forceinline__ void cml__att90b_store_ds_stsm(uint8_t *dsb, const uint32_t *ds, int key_loc, int lane) {
    const int BN = CML_ATT90B_BN;
    const uint32_t row = key_loc - lane / 4 + (lane & 15), c = (lane >> 4) ^ (lane & 7);
    const uint32_t base = cml__smem_addr(dsb) + row * 128;
#pragma unroll
    for (int q = 0; q < BM / 8; q += 2) {
        const uint32_t a = base + (q / 8) * BN * 128 + (((q % 8) ^ c) * 16);
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(ds[2 * q]),
                     "r"(ds[2 * q + 1]), "r"(ds[2 * q + 2]), "r"(ds[2 * q + 3])
                     : "memory");
    }
}

/* dK (times scale) and dV rows key, key + 8 straight from registers (rows past S_kv skipped). */
template <int DT, int D>
static __device__ __forceinline__ void cml__att90b_store_dkv(const cml__att90b_params &p, const float *dk,
                                                             const float *dv, int b, int hk, int key, int dcol0) {
    uint16_t *dK = (uint16_t *)p.dK + b * p.dk_s[0] + hk * p.dk_s[2];
    uint16_t *dV = (uint16_t *)p.dV + b * p.dv_s[0] + hk * p.dv_s[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int j = key + 8 * r;
        if (j >= p.Sk) continue;
        uint16_t *krow = dK + (long long)j * p.dk_s[1], *vrow = dV + (long long)j * p.dv_s[1];
#pragma unroll
        for (int q = 0; q < D / 8; q++) {
            const int d = 8 * q + dcol0;
            *(uint32_t *)(krow + d) = cml__att90_pack<DT>(dk[4 * q + 2 * r] * p.scale, dk[4 * q + 2 * r + 1] * p.scale);
            *(uint32_t *)(vrow + d) = cml__att90_pack<DT>(dv[4 * q + 2 * r], dv[4 * q + 2 * r + 1]);
        }
    }
}

/* The dQ partial of step k (BM x D; this consumer's 64 x 64 block) = dS K, issued (not committed)
 * once both consumers' dS^T rows of step k are in buffer k % 2: ds_lo the descriptor word of dS^T
 * buffer 0's block (mrow0 / 64) (buffer 1 is ds_bytes further), k_lo of K's block (ncol0 / 64), both
 * leading byte offset BN 128. */
template <int DT, int D, int BM, int ST, int NDQ>
static __device__ __forceinline__ void cml__att90b_dq_issue_lo(float *dq, uint8_t *smem, int k, uint32_t ds_lo,
                                                               uint32_t k_lo) {
    typedef cml__att90b_smem<D, BM, ST, NDQ> sm;
    uint64_t *ds_full = (uint64_t *)(smem + sm::off_bar) + 1 + 3 * ST + 2 * NDQ;
    const int buf = k & 1;
    cml__mbar_wait(&ds_full[buf], (k >> 1) & 1); /* both consumers' dS^T rows of step k */
    cml__wgmma_fence();
    cml__att90b_mma_dq_lo<DT>(dq, ds_lo + buf * (sm::ds_bytes >> 4), k_lo);
}

/* After the dQ product of step k completed (wgmma_wait): releases dS^T buffer k % 2 and hands the
 * partial to the dQ writers through dQ buffer it_dq % NDQ, with its semaphore index and rank. */
template <int D, int BM, int ST, int NDQ, int VAR>
static __device__ __forceinline__ void cml__att90b_dq_finish(float *dq, uint8_t *smem, int k, int idx, int rank,
                                                             int &it_dq, int consumer, int lane,
                                                             cml__att90b_prof<VAR> &pf, int ps) {
    typedef cml__att90b_smem<D, BM, ST, NDQ> sm;
    uint64_t *dq_full = (uint64_t *)(smem + sm::off_bar) + 1 + 3 * ST, *dq_empty = dq_full + NDQ;
    uint64_t *ds_empty = dq_empty + NDQ + 2;
    cml__wgmma_reg_fence<32>(dq);
    if (threadIdx.x % 128 == 0) cml__mbar_arrive(&ds_empty[k & 1]); /* this consumer is done with dS^T of step k */
    const int qb = it_dq % NDQ;
    pf.lap(ps);
    if (it_dq >= NDQ) cml__mbar_wait(&dq_empty[qb], (it_dq / NDQ - 1) & 1); /* partial it_dq - NDQ was read */
    pf.lap(ps + 1);
    float4 *dqs = (float4 *)(smem + sm::off_dq + qb * sm::dq_bytes); /* fragment order: float4 (q, consumer, thread) */
#pragma unroll
    for (int q = 0; q < 8; q++)
        dqs[q * 256 + consumer * 128 + threadIdx.x % 128] = make_float4(dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
    if (consumer == 0 && threadIdx.x % 128 == 0) ((int4 *)(smem + sm::off_dqmeta))[qb] = make_int4(idx, rank, 0, 0);
    cml__fence_proxy_async_smem();
    __syncwarp();
    if (lane == 0) cml__mbar_arrive(&dq_full[qb]);
    it_dq++;
}

template <int DT, int D, int BM, int ST, int NDQ, int VAR = 0>
static __global__ void __launch_bounds__(CML_ATT90B_THREADS, 1)
    cml__att90b_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                       const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_do,
                       const __grid_constant__ cml__att90b_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef cml__att90b_smem<D, BM, ST, NDQ> sm;
    const int BN = CML_ATT90B_BN;
    const bool EARLYREL = (VAR & CML_ATT90B_V_EARLYREL) != 0;
    extern __shared__ uint8_t cml__att90b_smem_raw[];
    /* aligned by pointer arithmetic on the __shared__ array (not through an integer), so that the
     * compiler keeps knowing the accesses are shared-memory ones (LDS/STS, not generic) */
    uint8_t *smem = cml__att90b_smem_raw + ((1024u - (cml__smem_addr(cml__att90b_smem_raw) & 1023u)) & 1023u);
    uint64_t *bars = (uint64_t *)(smem + sm::off_bar);
    uint64_t *kv_full = bars, *q_full = bars + 1, *do_full = q_full + ST, *qd_empty = do_full + ST,
             *dq_full = qd_empty + ST, *dq_empty = dq_full + NDQ,
             *ds_full = dq_empty + NDQ, *ds_empty = ds_full + 2;

    if (threadIdx.x == 0) {
        cml__mbar_init(kv_full, 1);
        for (int s = 0; s < ST; s++) {
            cml__mbar_init(&q_full[s], 1);
            cml__mbar_init(&do_full[s], 1);
            cml__mbar_init(&qd_empty[s], 256); /* one arrival per consumer thread (each releases its own reads) */
        }
        for (int s = 0; s < NDQ; s++) {
            cml__mbar_init(&dq_full[s], 8); /* one arrival per consumer warp */
            cml__mbar_init(&dq_empty[s], 1);
        }
        for (int s = 0; s < 2; s++) {
            cml__mbar_init(&ds_full[s], 8);  /* one arrival per consumer warp: its dS^T rows are written */
            cml__mbar_init(&ds_empty[s], 2); /* one arrival per consumer: its dQ product read the buffer */
        }
        cml__mbar_init_fence();
    }
    __syncthreads();
    cml__pdl_launch_dependents(); /* the convert kernel may be scheduled: see cml__att90b_dq_kernel */

    const int wg = threadIdx.x / 128;
    if ((VAR & CML_ATT90B_V_EXITT) && threadIdx.x == 0) p.prof[64 * blockIdx.x + 60] = cml__att90b_globaltimer();
    if (wg == 0) {
        cml__regs_dealloc<CML_ATT90B_PRODUCER_REGS>();
        if (threadIdx.x == 0) cml__att90b_produce<D, BM, ST, NDQ, VAR>(&map_q, &map_k, &map_v, &map_do, p, smem);
        else if (threadIdx.x % 32 == 0 && threadIdx.x / 32 <= NDQ)
            cml__att90b_write_dq<D, BM, ST, NDQ, VAR>(p, smem, threadIdx.x / 32 - 1);
    } else {
        cml__regs_alloc<CML_ATT90B_CONSUMER_REGS>();
        const int consumer = wg - 1, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
        const int key_loc = 64 * consumer + 16 * warp + lane / 4; /* this thread's key rows: key_loc, +8 */
        const int qcol0 = 2 * (lane % 4);
        const int off = p.Sk - p.Sq;
        const uint32_t k_addr = cml__smem_addr(smem + sm::off_k), v_addr = cml__smem_addr(smem + sm::off_v);
        const int4 *meta = (const int4 *)(smem + sm::off_meta);
        int4 *dq_meta = (int4 *)(smem + sm::off_dqmeta);
        const float *lse_all = (const float *)(smem + sm::off_lse), *di_all = (const float *)(smem + sm::off_di);
        /* the descriptor words of the fixed operand bases, once */
        const uint32_t k_lo = cml__att90b_desc_lo(k_addr + consumer * 64 * 128, 16);
        const uint32_t v_lo = cml__att90b_desc_lo(v_addr + consumer * 64 * 128, 16);
        const uint32_t kdq_lo = cml__att90b_desc_lo(k_addr + (cml__att90b_ncol0<D, BM>(consumer) / 64) * BN * 128, BN * 128);
        const uint32_t ds_lo = cml__att90b_desc_lo(
            cml__smem_addr(smem + sm::off_ds) + (cml__att90b_mrow0<D, BM>(consumer) / 64) * BN * 128, BN * 128);
        float dk[D / 2], dv[D / 2];
        int tcount = 0, it_dq = 0;
        int prev_idx = -1, prev_rank = 0; /* the deferred dQ product of the last step (same tile), if any */
        cml__att90b_prof<VAR> pf; /* slots 20 consumer + 0..17: the phases below */
        pf.init(threadIdx.x % 128 == 0 ? p.prof : NULL);
        const int ps = 20 * consumer;
        if (consumer == 1) cml__att90_bar_arrive(1, 256); /* ping-pong: consumer 0 issues first */
        for (int it = 0;; it++) {
            const int s = it % ST;
            cml__mbar_wait(&q_full[s], (it / ST) & 1); /* Q, lse2 of step it (and its description) */
            /* read by lane 0 and shuffled: warp-uniform in the compiler's eyes (a branch on a value
             * that looked divergent would make ptxas serialize the wgmmas, C7520) */
            int4 mt = make_int4(0, 0, 0, 0);
            if (lane == 0) mt = meta[s];
            const int tile = __shfl_sync(0xffffffffu, mt.x, 0), h = __shfl_sync(0xffffffffu, mt.y, 0);
            const int m = __shfl_sync(0xffffffffu, mt.z, 0), flags = __shfl_sync(0xffffffffu, mt.w, 0);
            pf.lap(ps + 0);
            if (tile < 0) { /* pass the end on to every dQ writer (nothing is deferred: tiles end drained) */
                for (int k = it_dq; k < it_dq + NDQ; k++) {
                    const int qb = k % NDQ;
                    if (k >= NDQ) cml__mbar_wait(&dq_empty[qb], (k / NDQ - 1) & 1);
                    if (consumer == 0 && threadIdx.x % 128 == 0) dq_meta[qb] = make_int4(-1, 0, 0, 0);
                    __syncwarp();
                    if (lane == 0) cml__mbar_arrive(&dq_full[qb]);
                }
                break;
            }
            /* the step description, decoded by the producer: tile = the semaphore index, h = j0 */
            const int j0 = h, i0 = m * BM;
            const bool mask = (flags & CML_ATT90B_MASK) != 0;
            const bool last = (flags & CML_ATT90B_LAST) != 0;
            if (flags & CML_ATT90B_FIRST) {
                cml__mbar_wait(kv_full, tcount & 1); /* this tile's K, V */
#pragma unroll
                for (int i = 0; i < D / 2; i++) dk[i] = dv[i] = 0.0f;
                pf.lap(ps + 1);
            }
            const uint32_t q_addr = cml__smem_addr(smem + sm::off_q + s * sm::qd_bytes);
            const uint32_t do_addr = cml__smem_addr(smem + sm::off_do + s * sm::qd_bytes);
            float st[BM / 2], dpt[BM / 2];
            uint32_t pa[BM / 4], ds[BM / 4];
            /* ping-pong: the consumers take turns issuing their products (named barriers 1, 2), so
             * that one's exp and dS work runs under the other's products */
            cml__att90_bar_sync(1 + consumer, 256);
            pf.lap(ps + 2);
            cml__wgmma_fence();
            cml__att90b_mma_nt_lo<DT, D, BM, BN>(st, k_lo, cml__att90b_desc_lo(q_addr, 16)); /* S^T = K Q^T */
            cml__mbar_wait(&do_full[s], (it / ST) & 1); /* dO, Di */
            pf.lap(ps + 3);
            cml__att90b_mma_nt_lo<DT, D, BM, BN>(dpt, v_lo, cml__att90b_desc_lo(do_addr, 16)); /* dP^T = V dO^T */
            cml__wgmma_commit();
            cml__att90_bar_arrive(2 - consumer, 256);
            pf.lap(ps + 4);
            cml__wgmma_wait<0>();
            cml__wgmma_reg_fence<BM / 2>(st);
            cml__wgmma_reg_fence<BM / 2>(dpt);
            pf.lap(ps + 5);
            if (mask) /* the step's mask flag is warp-uniform (shuffled): no divergence */
                cml__att90b_p_ds<DT, BM, 1>(pa, ds, st, dpt, lse_all + s * BM, di_all + s * BM, j0 + key_loc - i0, qcol0,
                                            p.Sk - i0, p.causal, off, p.scale_log2);
            else
                cml__att90b_p_ds<DT, BM, 0>(pa, ds, st, dpt, lse_all + s * BM, di_all + s * BM, 0, qcol0, 0, 0, 0,
                                            p.scale_log2);
            pf.lap(ps + 6);
            /* dS^T of this step into buffer it % 2, once both consumers' dQ products of step it - 2
             * are done with it; then published to both (ds_full) */
            const int buf = it & 1;
            if (it >= 2) cml__mbar_wait(&ds_empty[buf], ((it >> 1) - 1) & 1);
            pf.lap(ps + 7);
            cml__att90b_store_ds_stsm<BM>(smem + sm::off_ds + buf * sm::ds_bytes, ds, key_loc, lane);
            cml__fence_proxy_async_smem();
            __syncwarp();
            if (lane == 0) cml__mbar_arrive(&ds_full[buf]);
            pf.lap(ps + 8);
            /* dV, dK, and the dQ product of the last step (the other consumer wrote its half of that
             * dS^T a step ago, so the two need not run in lockstep) */
            if (prev_idx >= 0) {
                float dq[32];
                cml__att90_bar_sync(1 + consumer, 256);
                pf.lap(ps + 9);
                cml__wgmma_fence();
                cml__att90b_mma_rs_lo<DT, D, BM>(dv, pa, cml__att90b_desc_lo(do_addr, BM * 128)); /* dV += P^T dO */
                cml__att90b_mma_rs_lo<DT, D, BM>(dk, ds, cml__att90b_desc_lo(q_addr, BM * 128));  /* dK += dS^T Q */
                cml__att90b_dq_issue_lo<DT, D, BM, ST, NDQ>(dq, smem, it - 1, ds_lo, kdq_lo);
                cml__wgmma_commit();
                cml__att90_bar_arrive(2 - consumer, 256);
                pf.lap(ps + 10);
                cml__wgmma_wait<0>();
                if (EARLYREL && !last) cml__mbar_arrive(&qd_empty[s]); /* Q, dO, lse2, Di of stage s are read */
                pf.lap(ps + 11);
                cml__att90b_dq_finish<D, BM, ST, NDQ, VAR>(dq, smem, it - 1, prev_idx, prev_rank, it_dq, consumer, lane,
                                                           pf, ps + 12);
                pf.lap(ps + 14);
            } else {
                cml__att90_bar_sync(1 + consumer, 256);
                pf.lap(ps + 9);
                cml__wgmma_fence();
                cml__att90b_mma_rs_lo<DT, D, BM>(dv, pa, cml__att90b_desc_lo(do_addr, BM * 128));
                cml__att90b_mma_rs_lo<DT, D, BM>(dk, ds, cml__att90b_desc_lo(q_addr, BM * 128));
                cml__wgmma_commit();
                cml__att90_bar_arrive(2 - consumer, 256);
                pf.lap(ps + 10);
                cml__wgmma_wait<0>();
                if (EARLYREL && !last) cml__mbar_arrive(&qd_empty[s]);
                pf.lap(ps + 11);
            }
            const int idx = tile;
            const int rank = cml__att90b_rank<BM>(p, m, j0 / BN); /* no runtime division */
            if (last) { /* this step's dQ product too, before K is replaced */
                float dq2[32];
                cml__att90b_dq_issue_lo<DT, D, BM, ST, NDQ>(dq2, smem, it, ds_lo, kdq_lo);
                cml__wgmma_commit();
                cml__wgmma_wait<0>();
                pf.lap(ps + 15);
                cml__att90b_dq_finish<D, BM, ST, NDQ, VAR>(dq2, smem, it, idx, rank, it_dq, consumer, lane, pf, ps + 12);
                pf.lap(ps + 14);
            }
            cml__wgmma_reg_fence<D / 2>(dv);
            cml__wgmma_reg_fence<D / 2>(dk);
            cml__att90_keep<BM / 4>(pa);
            cml__att90_keep<BM / 4>(ds);
            prev_idx = last ? -1 : idx;
            prev_rank = rank;
            /* Q, dO, lse2, Di of stage s are read; so are K, V when this is the tile's last step */
            if (!EARLYREL || last) cml__mbar_arrive(&qd_empty[s]);
            if (last) {
                /* once a tile: (b, hk) of the semaphore index (b Hq + h) n_qt + m, h in group hk */
                const int bh = idx / p.n_qt, b = bh / p.Hq, hk = bh % p.Hq / p.group;
                cml__att90b_store_dkv<DT, D>(p, dk, dv, b, hk, j0 + key_loc, qcol0);
                tcount++;
            }
            pf.lap(ps + 16);
            pf.count(ps + 17);
        }
        if (consumer == 0) cml__att90_bar_sync(1, 256); /* consumer 1's last hand-over */
        if ((VAR & CML_ATT90B_V_EXITT) && threadIdx.x % 128 == 0)
            p.prof[64 * blockIdx.x + 61 + consumer] = cml__att90b_globaltimer();
    }
#endif
}

#endif
