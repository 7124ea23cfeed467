/* The main loop of the exact-f32 GEMM on CUDA cores (gemm_f32.cu; also built
 * by the version ladder in dev/gemm_f32/): one thread block computes a BM x BN
 * tile of op(A) op(B) in registers, accumulating over K in order (k = 0, 1,
 * ...) with fused multiply-adds, so a result never depends on the launch
 * (bitwise repeatable; no split over K).
 *
 * Layout (the "classic ladder" up to warp tiling):
 *  - each thread holds TM x 8 accumulators (TM = 4, 8 or 16) as sub-tiles of 4 x 4,
 *    16 rows and 32 columns apart; a warp's lanes form a 4 (m) x 8 (n) grid, so a
 *    warp owns 4*TM x 64 of the tile. The fragment loads of one k are TM/4
 *    16-byte LDS for A (4 distinct addresses in the warp) and two for B (8
 *    distinct, all 32 banks): one shared-memory wavefront each, for 8*TM FFMA.
 *  - shared memory holds both operands k-major (As[k][m], Bs[k][n]), so the
 *    fragments are float4 reads. An operand stored contiguous along k in global
 *    memory (A with op N, B with op T) is loaded as float4 along k and stored
 *    transposed (4 scalar stores; rows padded by 4 floats against conflicts);
 *    one contiguous along m or n is copied as float4 straight across.
 *  - double buffering: the next k-tile is read from global memory into
 *    registers while the current one is multiplied out of shared memory, then
 *    stored into the other buffer: one __syncthreads per k-tile.
 *  - shared memory is dynamic (cml__f32_smem_bytes): some tiles need more than
 *    the 48 KB a launch gets without cudaFuncSetAttribute.
 *
 * Edges: rows (m or n) past the matrix are clamped to the last row on loads
 * (their results are never stored: each output depends only on its own row of
 * op(A) and column of op(B)); columns past it are read element by element and
 * zero-filled; the last, partial k-tile is zero-filled past K. The vector loads
 * need 16-byte aligned pointers and leading dimensions that are multiples of 4
 * (checked by cml__gemm_f32_takes). */
#ifndef CML_KERNELS_CUDA_GEMM_GEMM_F32_TILE_CUH
#define CML_KERNELS_CUDA_GEMM_GEMM_F32_TILE_CUH

#define CML_F32_WARP_N 64

/* Threads of a BM x BN tile whose threads hold TM x 8 results. */
#define CML_F32_THREADS(BM, BN, TM) (((BM) / (4 * (TM))) * ((BN) / CML_F32_WARP_N) * 32)

/* Padded row lengths of the shared tiles: transposed stores then hit distinct banks. */
template <int BM, bool A_T> struct cml__f32_lds_a { static constexpr int value = BM + (A_T ? 0 : 4); };
template <int BN, bool B_T> struct cml__f32_lds_b { static constexpr int value = BN + (B_T ? 4 : 0); };

/* Dynamic shared memory of one block. */
template <int BM, int BN, int BK, bool A_T, bool B_T, int STAGES> constexpr int cml__f32_smem_bytes() {
    return STAGES * BK * (cml__f32_lds_a<BM, A_T>::value + cml__f32_lds_b<BN, B_T>::value) * (int)sizeof(float);
}

extern __shared__ __align__(16) float cml__f32_smem[];

/* The global-to-shared copy of one operand's k-tile, staged through registers.
 * MN is the tile's extent along m (A) or n (B); KCONTIG says whether the stored
 * matrix is contiguous along k: then it is MN-side x K (element (r, k) at
 * src[r * ld + k]), else K x MN-side. Offsets are 32-bit (the caller checks that
 * each stored matrix spans < 2^31 elements): few registers, so the 64
 * accumulators never spill. Positions inside the tile are recomputed from
 * threadIdx.x (shifts and masks) rather than held. */
template <int THREADS, int BK, int MN, bool KCONTIG> struct cml__f32_loader {
    static constexpr int F4 = MN * BK / 4;
    /* Every thread loads the same number of float4, or (small tiles in big blocks) the
     * first F4 threads load one each. */
    static constexpr int PER_THREAD = F4 >= THREADS ? F4 / THREADS : 1;
    static constexpr bool SOME = F4 < THREADS;
    static_assert(F4 % THREADS == 0 || THREADS % F4 == 0, "the tile's float4 split evenly over the threads");
    static_assert(KCONTIG || SOME || THREADS % (MN / 4) == 0, "a thread's float4 share one column");
    static constexpr int KSTEP = KCONTIG || SOME ? 0 : THREADS / (MN / 4); /* k rows between a thread's loads */

    const float *src;
    int off[KCONTIG ? PER_THREAD : 1]; /* element offsets at k = 0 */
    int ld;
    int valid;                         /* !KCONTIG: elements of the float4 inside the matrix (0..4) */
    bool on;                           /* this thread takes part (always, unless SOME) */
    float4 reg[PER_THREAD];

    static __device__ __forceinline__ int idx(int i) { return (int)threadIdx.x + i * THREADS; }

    /* mn0: the tile's first m or n; extent: M or N; ld: the stored matrix's row stride. */
    __device__ __forceinline__ void init(const float *src_, int ld_, int mn0, int extent) {
        src = src_;
        ld = ld_;
        on = !SOME || (int)threadIdx.x < F4;
        valid = 4;
        if constexpr (KCONTIG) {
#pragma unroll
            for (int i = 0; i < PER_THREAD; i++) {
                const int r = min(mn0 + idx(i) / (BK / 4), extent - 1);
                off[i] = r * ld + (idx(i) % (BK / 4)) * 4;
            }
        } else {
            const int c = mn0 + (idx(0) % (MN / 4)) * 4, left = extent - c;
            valid = left >= 4 ? 4 : (left > 0 ? left : 0);
            off[0] = (idx(0) / (MN / 4)) * ld + (valid > 0 ? c : 0);
        }
    }

    /* Reads the k-tile starting at k0 into registers. GUARD: the last tile, K % BK != 0. */
    template <bool GUARD> __device__ __forceinline__ void load(int k0, int K) {
        if (SOME && !on) return;
#pragma unroll
        for (int i = 0; i < PER_THREAD; i++) {
            if constexpr (KCONTIG) {
                const float *p = src + (off[i] + k0);
                if (!GUARD) {
                    reg[i] = __ldg((const float4 *)p);
                } else {
                    const int kk = k0 + (idx(i) % (BK / 4)) * 4;
                    reg[i].x = kk + 0 < K ? __ldg(p + 0) : 0.0f;
                    reg[i].y = kk + 1 < K ? __ldg(p + 1) : 0.0f;
                    reg[i].z = kk + 2 < K ? __ldg(p + 2) : 0.0f;
                    reg[i].w = kk + 3 < K ? __ldg(p + 3) : 0.0f;
                }
            } else {
                const float *p = src + (off[0] + (k0 + i * KSTEP) * ld);
                const bool row_ok = !GUARD || k0 + idx(i) / (MN / 4) < K;
                if (row_ok && valid == 4) {
                    reg[i] = __ldg((const float4 *)p);
                } else {
                    const int v = row_ok ? valid : 0;
                    reg[i].x = v > 0 ? __ldg(p + 0) : 0.0f;
                    reg[i].y = v > 1 ? __ldg(p + 1) : 0.0f;
                    reg[i].z = v > 2 ? __ldg(p + 2) : 0.0f;
                    reg[i].w = 0.0f; /* v == 4 took the vector path */
                }
            }
        }
    }

    /* One float4 of the share (index I) at a time, so that the next tile's staging can be spread
     * over the k-steps (cml__f32_mainloop_phased). Same element
     * placement as load / store. */
    template <bool GUARD, int I> __device__ __forceinline__ void load_part(int k0, int K) {
        if (SOME && !on) return;
        if constexpr (KCONTIG) {
            const float *p = src + (off[I] + k0);
            if (!GUARD) {
                reg[I] = __ldg((const float4 *)p);
            } else {
                const int kk = k0 + (idx(I) % (BK / 4)) * 4;
                reg[I].x = kk + 0 < K ? __ldg(p + 0) : 0.0f;
                reg[I].y = kk + 1 < K ? __ldg(p + 1) : 0.0f;
                reg[I].z = kk + 2 < K ? __ldg(p + 2) : 0.0f;
                reg[I].w = kk + 3 < K ? __ldg(p + 3) : 0.0f;
            }
        } else {
            const float *p = src + (off[0] + (k0 + I * KSTEP) * ld);
            const bool row_ok = !GUARD || k0 + idx(I) / (MN / 4) < K;
            if (row_ok && valid == 4) {
                reg[I] = __ldg((const float4 *)p);
            } else {
                const int v = row_ok ? valid : 0;
                reg[I].x = v > 0 ? __ldg(p + 0) : 0.0f;
                reg[I].y = v > 1 ? __ldg(p + 1) : 0.0f;
                reg[I].z = v > 2 ? __ldg(p + 2) : 0.0f;
                reg[I].w = 0.0f;
            }
        }
    }
    template <int LD, int I> __device__ __forceinline__ void store_part(float *S) const {
        if (SOME && !on) return;
        if constexpr (KCONTIG) {
            const int row = idx(I) / (BK / 4), k = (idx(I) % (BK / 4)) * 4;
            S[(k + 0) * LD + row] = reg[I].x;
            S[(k + 1) * LD + row] = reg[I].y;
            S[(k + 2) * LD + row] = reg[I].z;
            S[(k + 3) * LD + row] = reg[I].w;
        } else {
            *(float4 *)&S[(idx(I) / (MN / 4)) * LD + (idx(I) % (MN / 4)) * 4] = reg[I];
        }
    }

    /* Writes the registers into a k-major shared tile S[BK][LD]. */
    template <int LD> __device__ __forceinline__ void store(float *S) const {
        if (SOME && !on) return;
#pragma unroll
        for (int i = 0; i < PER_THREAD; i++) {
            if constexpr (KCONTIG) {
                const int row = idx(i) / (BK / 4), k = (idx(i) % (BK / 4)) * 4;
                S[(k + 0) * LD + row] = reg[i].x;
                S[(k + 1) * LD + row] = reg[i].y;
                S[(k + 2) * LD + row] = reg[i].z;
                S[(k + 3) * LD + row] = reg[i].w;
            } else {
                *(float4 *)&S[(idx(i) / (MN / 4)) * LD + (idx(i) % (MN / 4)) * 4] = reg[i];
            }
        }
    }
};


/* Where accumulator acc[i][j] of the calling thread lands in the BM x BN tile. */
template <int BN, int TM> struct cml__f32_thread_pos {
    int row0, col0; /* acc[i][j] is at (row0 + (i / 4) * 16 + i % 4, col0 + (j / 4) * 32 + j % 4) */
    __device__ __forceinline__ cml__f32_thread_pos(int tid) {
        const int warp = tid / 32, lane = tid % 32;
        constexpr int WARPS_N = BN / CML_F32_WARP_N;
        row0 = (warp / WARPS_N) * (4 * TM) + (lane / 8) * 4;
        col0 = (warp % WARPS_N) * CML_F32_WARP_N + (lane % 8) * 4;
    }
};

/* acc (zeroed here) = op(A)[m0 : m0 + BM, :] op(B)[:, n0 : n0 + BN] over k = 0 .. K-1.
 * A_T: op_a == T (A stored K x M); B_T: op_b == T (B stored N x K). STAGES: 2 (double
 * buffering, the production setting) or 1 (kept for the ladder). Needs
 * cml__f32_smem_bytes of dynamic shared memory. Ends with a __syncthreads, so a
 * caller may reuse the shared memory afterwards. */
template <int BM, int BN, int BK, int TM, bool A_T, bool B_T, int STAGES>
__device__ __forceinline__ void cml__f32_mainloop(float (&acc)[TM][8], const float *A, int lda, const float *B,
                                                  int ldb, int M, int N, int K, int m0, int n0) {
    constexpr int THREADS = CML_F32_THREADS(BM, BN, TM);
    constexpr int LDA_S = cml__f32_lds_a<BM, A_T>::value, LDB_S = cml__f32_lds_b<BN, B_T>::value;
    float *const As = cml__f32_smem;                       /* [STAGES][BK][LDA_S] */
    float *const Bs = cml__f32_smem + STAGES * BK * LDA_S; /* [STAGES][BK][LDB_S] */

    cml__f32_loader<THREADS, BK, BM, !A_T> la;
    cml__f32_loader<THREADS, BK, BN, B_T> lb;
    la.init(A, lda, m0, M);
    lb.init(B, ldb, n0, N);
    const cml__f32_thread_pos<BN, TM> pos(threadIdx.x);

#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;

    const int KT = (K + BK - 1) / BK;
    const bool tail = K % BK != 0;
    if (KT == 1 && tail) {
        la.template load<true>(0, K);
        lb.template load<true>(0, K);
    } else {
        la.template load<false>(0, K);
        lb.template load<false>(0, K);
    }
    la.template store<LDA_S>(As);
    lb.template store<LDB_S>(Bs);
    __syncthreads();

    for (int kt = 0; kt < KT; kt++) {
        const int cur = STAGES == 2 ? (kt & 1) : 0;
        const bool more = kt + 1 < KT;
        if (more) { /* the next tile's global reads fly while this one is multiplied */
            const int k0 = (kt + 1) * BK;
            if (tail && kt + 2 == KT) {
                la.template load<true>(k0, K);
                lb.template load<true>(k0, K);
            } else {
                la.template load<false>(k0, K);
                lb.template load<false>(k0, K);
            }
        }
        const float *as = As + cur * BK * LDA_S + pos.row0;
        const float *bs = Bs + cur * BK * LDB_S + pos.col0;
#pragma unroll
        for (int k = 0; k < BK; k++) {
            float a[TM], b[8];
#pragma unroll
            for (int q = 0; q < TM / 4; q++) *(float4 *)&a[4 * q] = *(const float4 *)(as + k * LDA_S + 16 * q);
            *(float4 *)&b[0] = *(const float4 *)(bs + k * LDB_S);
            *(float4 *)&b[4] = *(const float4 *)(bs + k * LDB_S + 32);
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more) {
            const int next = STAGES == 2 ? cur ^ 1 : 0;
            if (STAGES == 1) __syncthreads(); /* every warp is done reading the only buffer */
            la.template store<LDA_S>(As + next * BK * LDA_S);
            lb.template store<LDB_S>(Bs + next * BK * LDB_S);
        }
        __syncthreads();
    }
}

/* ---- the phased main loop (session 14, helpers h14b for 128x128x16/8x8, h14c for the rest) -----------
 * Same tile, thread layout and shared layout as cml__f32_mainloop and the same FFMA chain per
 * output (k ascending, one fmaf a step, acc starting at +0), so D is bitwise the same; what differs
 * is what the SASS of that loop showed (dev/gemm_f32/README.md, session 14):
 *  - the next k-tile's global -> shared staging goes in P phases (cml__f32_phase_plan: phase p
 *    starts at k = p BK / P; for 128x128x16/8x8 P = 2, one float4 of each operand a phase, loaded
 *    at the phase's start and stored into the free buffer at the next one's, the last at the
 *    tile's end): 8 staging registers live instead of 16, no spill at the 128-register cap, and
 *    with them the k-step fragments double-buffered explicitly (k + 1's LDS issued before k's
 *    FFMAs, so no k-step waits a shared-memory latency for its fragments); P = 1 keeps the old
 *    staging (whole tile loaded at the start, stored at the end) for tiles with registers to spare;
 *  - serpentine FFMA order: row i of the thread's 8x8 runs j = 0..7 when i is even and 7..0 when odd,
 *    so the FFMA that fetches a new a[i] shares b[j] with the one before it (operand-reuse cache):
 *    1.12 register-port cycles an FFMA instead of 1.26 (NN) to 1.57 (TN).
 * Measured (128x128x16/8x8) on the H100 against cml__f32_mainloop (3 rounds in turns, cuBLAS sgemm
 * in the same process): squares 2048 / 4096 / 8192 NN +1.8 / +2.3 / +2.7%, the GPT-2 NT forwards +5%, NN +2-4%;
 * the staging alone (without the serpentine order) gained nothing on the squares. gemm_f32.cu's
 * f32_loop_phases says which configurations run it (those where it measured faster). */
template <int TM>
__device__ __forceinline__ void cml__f32_outer_serpentine(float (&acc)[TM][8], const float (&a)[TM], const float (&b)[8]) {
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int jj = 0; jj < 8; jj++) {
            const int j = (i & 1) ? 7 - jj : jj;
            acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
}

/* The staging schedule over P phases (session 14, h14c: loaders of unequal shares). A loader of
 * PX float4 a thread makes G = min(PX, P) groups of PX / G consecutive float4; group g is loaded at
 * the start of phase g P / G and stored into the free buffer at the start of phase (g + 1) P / G
 * (phase P: the tile's end). So every phase holds at most one group of each operand in registers,
 * and an operand with fewer float4 than phases loads every P / PX phases (its float4 stay in
 * flight longer). P = PX: one float4 a phase (the 128x128x16/8x8 schedule); P = 1: the whole tile
 * at k = 0, stored at the end (cml__f32_mainloop's staging). */
template <int P, int PX> struct cml__f32_phase_plan {
    static_assert(PX % P == 0 || P % PX == 0, "phases and a loader's float4 share divide one another");
    static constexpr int G = PX < P ? PX : P, PER = PX / G, STEP = P / G;
    __host__ __device__ static constexpr int load_phase(int i) { return (i / PER) * STEP; }
    __host__ __device__ static constexpr int store_phase(int i) { return (i / PER + 1) * STEP; }
};
/* Loader l's float4 (index I and up) loaded at the start of phase p / stored at the start of phase
 * p (p is a constant after unrolling: the comparisons fold). */
template <int P, bool GUARD, int I, class L>
__device__ __forceinline__ void cml__f32_phase_load(L &l, int k0, int K, int p) {
    if constexpr (I < L::PER_THREAD) {
        if (cml__f32_phase_plan<P, L::PER_THREAD>::load_phase(I) == p) l.template load_part<GUARD, I>(k0, K);
        cml__f32_phase_load<P, GUARD, I + 1>(l, k0, K, p);
    }
}
template <int P, int LD, int I, class L>
__device__ __forceinline__ void cml__f32_phase_store(const L &l, float *S, int p) {
    if constexpr (I < L::PER_THREAD) {
        if (cml__f32_phase_plan<P, L::PER_THREAD>::store_phase(I) == p) l.template store_part<LD, I>(S);
        cml__f32_phase_store<P, LD, I + 1>(l, S, p);
    }
}

template <int BM, int BN, int BK, int TM, bool A_T, bool B_T, int P>
__device__ __forceinline__ void cml__f32_mainloop_phased(float (&acc)[TM][8], const float *A, int lda, const float *B,
                                                      int ldb, int M, int N, int K, int m0, int n0) {
    constexpr int THREADS = CML_F32_THREADS(BM, BN, TM);
    constexpr int LDA_S = cml__f32_lds_a<BM, A_T>::value, LDB_S = cml__f32_lds_b<BN, B_T>::value;
    using LA = cml__f32_loader<THREADS, BK, BM, !A_T>;
    using LB = cml__f32_loader<THREADS, BK, BN, B_T>;
    static_assert(!LA::SOME && !LB::SOME && P >= 1 && BK % P == 0 && TM % 4 == 0,
                  "the phased loop needs whole float4 shares for every thread and P dividing BK");
    constexpr int KP = BK / P; /* k-steps a phase */
    float *const As = cml__f32_smem;                  /* [2][BK][LDA_S] */
    float *const Bs = cml__f32_smem + 2 * BK * LDA_S; /* [2][BK][LDB_S] */

    LA la;
    LB lb;
    la.init(A, lda, m0, M);
    lb.init(B, ldb, n0, N);
    const cml__f32_thread_pos<BN, TM> pos(threadIdx.x);

#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;

    const int KT = (K + BK - 1) / BK;
    const bool tail = K % BK != 0;
    /* the first tile: whole, as the old loop */
    if (KT == 1 && tail) {
        la.template load<true>(0, K);
        lb.template load<true>(0, K);
    } else {
        la.template load<false>(0, K);
        lb.template load<false>(0, K);
    }
    la.template store<LDA_S>(As);
    lb.template store<LDB_S>(Bs);
    __syncthreads();

    for (int kt = 0; kt < KT; kt++) {
        const int cur = kt & 1;
        const bool more = kt + 1 < KT;
        const bool guard = tail && kt + 2 == KT;
        const int k0n = (kt + 1) * BK;
        const float *as = As + cur * BK * LDA_S + pos.row0;
        const float *bs = Bs + cur * BK * LDB_S + pos.col0;
        float *const an = As + (cur ^ 1) * BK * LDA_S;
        float *const bn = Bs + (cur ^ 1) * BK * LDB_S;
        float a[2][TM], b[2][8];
#pragma unroll
        for (int q = 0; q < TM / 4; q++) *(float4 *)&a[0][4 * q] = *(const float4 *)(as + 16 * q);
        *(float4 *)&b[0][0] = *(const float4 *)(bs);
        *(float4 *)&b[0][4] = *(const float4 *)(bs + 32);
#pragma unroll
        for (int k = 0; k < BK; k++) {
            /* staging: phase p's store (of what phase p - 1 loaded), then phase p's load */
            if (k % KP == 0 && more) {
                const int p = k / KP;
                if (p > 0) {
                    cml__f32_phase_store<P, LDA_S, 0>(la, an, p);
                    cml__f32_phase_store<P, LDB_S, 0>(lb, bn, p);
                }
                if (guard) {
                    cml__f32_phase_load<P, true, 0>(la, k0n, K, p);
                    cml__f32_phase_load<P, true, 0>(lb, k0n, K, p);
                } else {
                    cml__f32_phase_load<P, false, 0>(la, k0n, K, p);
                    cml__f32_phase_load<P, false, 0>(lb, k0n, K, p);
                }
            }
            if (k + 1 < BK) { /* the next k's fragments, before this k's FFMA */
                const int nx = (k + 1) & 1;
#pragma unroll
                for (int q = 0; q < TM / 4; q++)
                    *(float4 *)&a[nx][4 * q] = *(const float4 *)(as + (k + 1) * LDA_S + 16 * q);
                *(float4 *)&b[nx][0] = *(const float4 *)(bs + (k + 1) * LDB_S);
                *(float4 *)&b[nx][4] = *(const float4 *)(bs + (k + 1) * LDB_S + 32);
            }
            cml__f32_outer_serpentine<TM>(acc, a[k & 1], b[k & 1]);
        }
        if (more) {
            cml__f32_phase_store<P, LDA_S, 0>(la, an, P);
            cml__f32_phase_store<P, LDB_S, 0>(lb, bn, P);
        }
        __syncthreads();
    }
}

#endif
