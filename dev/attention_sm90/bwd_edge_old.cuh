/* Dev-only copy of the prep and convert kernels of attention_bwd_sm90.cuh as they were before
 * session 6 (git HEAD at the time), renamed old_*: bwd_edge_harness.cu checks the new ones bitwise
 * against them and times both. Needs attention_bwd_sm90.cuh included first. */
/* ---- prep: Di, lse2, semaphores ------------------------------------------------------------ */

/* 8 threads per padded row (16-byte loads of dO and O, a fixed butterfly). rows_pad is a
 * multiple of BM (>= 64) and the stride a multiple of 32 rows, so whole warps share each
 * loop trip (the shuffles). */
template <int DT, int D>
static __global__ void old_att90b_prep_kernel(const uint16_t *dO, const uint16_t *O, long long os0, long long os1,
                                               long long os2, const float *lse, int Hq, int Sq, int rows_per_bh,
                                               long long rows_pad, float *lse2, float *di, int *sem, int n_sem) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x, nthr = (long long)gridDim.x * blockDim.x;
    const int sub = threadIdx.x % 8;
    for (long long row = tid / 8; row < rows_pad; row += nthr / 8) {
        const long long bh = row / rows_per_bh;
        const int i = (int)(row % rows_per_bh), b = (int)(bh / Hq), h = (int)(bh % Hq);
        float acc = 0.0f;
        if (i < Sq) {
            const long long off = b * os0 + i * os1 + h * os2;
#pragma unroll
            for (int c = sub * 8; c < D; c += 64) {
                const uint4 x = *(const uint4 *)(dO + off + c), y = *(const uint4 *)(O + off + c);
                const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    float x0, x1, y0, y1;
                    if (DT == CML_ATT90_F16) {
                        const float2 xf = __half22float2(*(const __half2 *)&xs[k]);
                        const float2 yf = __half22float2(*(const __half2 *)&ys[k]);
                        x0 = xf.x, x1 = xf.y, y0 = yf.x, y1 = yf.y;
                    } else {
                        x0 = __uint_as_float(xs[k] << 16), x1 = __uint_as_float(xs[k] & 0xffff0000u);
                        y0 = __uint_as_float(ys[k] << 16), y1 = __uint_as_float(ys[k] & 0xffff0000u);
                    }
                    acc = fmaf(x0, y0, acc);
                    acc = fmaf(x1, y1, acc);
                }
            }
        }
        acc += __shfl_xor_sync(0xffffffffu, acc, 4);
        acc += __shfl_xor_sync(0xffffffffu, acc, 2);
        acc += __shfl_xor_sync(0xffffffffu, acc, 1);
        if (sub == 0) {
            const float inf = __int_as_float(0x7f800000);
            const float l = i < Sq ? lse[bh * Sq + i] : -inf;
            di[row] = i < Sq ? acc : 0.0f;
            lse2[row] = l == -inf ? inf : l * 1.4426950408889634f;
        }
    }
    for (long long k = tid; k <= n_sem; k += nthr) sem[k] = 0; /* n_sem semaphores, then the tile counter */
}

/* ---- convert: dQ = scale * accumulator ----------------------------------------------------- */

/* One float4 of the fragment order per thread: registers 4q..4q+3 of consumer c's thread t
 * (rows r, r + 8, columns col, col + 1 of its 64 x 64 block). */
template <int DT, int D, int BM>
static __global__ void old_att90b_dq_kernel(const float4 *acc, uint16_t *dQ, long long qs0, long long qs1,
                                             long long qs2, int Hq, int Sq, int n_qt, int causal, int off, float scale,
                                             long long n4) {
    const long long nthr = (long long)gridDim.x * blockDim.x;
    for (long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x; f < n4; f += nthr) {
        const long long tile = f / (BM * D / 4);
        const int u = (int)(f % (BM * D / 4));
        const int m = (int)(tile % n_qt), bh = (int)(tile / n_qt), b = bh / Hq, h = bh % Hq;
        const int i0 = m * BM;
        const int i_last = (i0 + BM < Sq ? i0 + BM : Sq) - 1;
        const bool touched = !causal || i_last + off >= 0; /* else no key block wrote the tile */
        const int q = u / 256, c = (u / 128) % 2, t = u % 128, warp = t / 32, lane = t % 32;
        const int row = cml__att90b_mrow0<D, BM>(c) + 16 * warp + lane / 4;
        const int col = cml__att90b_ncol0<D, BM>(c) + 8 * q + 2 * (lane % 4);
        const float4 v = touched ? acc[f] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        const long long base = b * qs0 + h * qs2 + col;
        if (i0 + row < Sq)
            *(uint32_t *)(dQ + base + (long long)(i0 + row) * qs1) = cml__att90_pack<DT>(v.x * scale, v.y * scale);
        if (i0 + row + 8 < Sq)
            *(uint32_t *)(dQ + base + (long long)(i0 + row + 8) * qs1) = cml__att90_pack<DT>(v.z * scale, v.w * scale);
    }
}

