/* CPU scaled dot-product attention, forward and backward: the reference for
 * the GPU kernels.
 *
 * All math is f32 (rows of narrow dtypes are converted on load). Query i sees
 * keys j < visible(i) = min(S_kv, i + S_kv - S_q + 1) when causal (bottom-right
 * aligned), all S_kv otherwise.
 *
 * Variable-length batches (desc->cu_seqlens_q/kv, checked by src/kernels/attention.c):
 * sequence b is rows q0 .. q0 + n_q - 1 (kv0 .. kv0 + n_kv - 1) of the packed
 * operands (batch stride 0), and everything above runs with its own n_q, n_kv
 * in place of S_q, S_kv (attn_seq). Tasks are laid out over the bounds S_q, S_kv
 * as for fixed lengths; those past a sequence's end do nothing. lse and Di keep
 * their (B, H_q, S_q) rows.
 *
 * Determinism: every output element is written by exactly one task, and each
 * task accumulates in a fixed order (scores over d ascending, sums over j or
 * (h, i) ascending, row sums in 8 interleaved partial sums), so results are
 * bitwise reproducible and independent of the thread count.
 *
 * Speed: keys are processed in tiles whose K (and V) rows are transposed into
 * (D, tile) scratch, so a row of scores is built as sum_d q[d] * kT[d][:],
 * a loop over keys the compiler vectorizes; exp is a branch-free polynomial
 * (Cephes expf, ~1.4 ulp) that vectorizes too.
 *
 * Forward: a task is a block of QB query rows of one (b, h). Its scores go to
 * a per-thread scratch of QB x S_kv floats (linear in S, never S_q x S_kv);
 * then a max-subtracted softmax per row, O = P V / l and lse = m + log(l).
 *
 * Backward (FlashAttention-2 math), with P_ij = exp(scale q_i.k_j - lse_i):
 *   pass 0, rows (b, h, i):     Di = rowsum(dO_i * O_i)
 *   pass 1, (b, h_q, i-block):  dQ_i = scale sum_j P_ij (dO_i . V_j - Di) K_j      (j ascending)
 *   pass 2, (b, h_kv, j-block): dV_j = sum_{h in group, i} P_ij dO_i,
 *                               dK_j = scale sum_{h in group, i} dS_ij Q_i        ((h, i) ascending)
 * Row accumulations (O, dQ, dK, dV) add four rows per pass, as (a + b) + (c + d),
 * so the accumulator is loaded and stored once per four rows.
 * Scores are recomputed in passes 1 and 2 (no S x S storage). Scratch comes
 * from the context's workspace: Di (B H_q S_q floats) and one slice per thread. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_transformer.h"
#include "kernels/cpu/strided.h"
#include "runtime/error.h"

#define QB 16 /* query rows per task (forward, dQ) */
#define KT 64 /* keys per tile (forward, dQ) */
#define KB 32 /* key rows per task (dK, dV) */

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
/* Floats rounded up to a cache line, so threads' slices do not share lines. */
static inline size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

typedef struct attn_job {
    const cml_attention_desc *d;
    int64_t group;      /* H_q / H_kv */
    float *scratch;     /* per-thread slices of `per_thread` floats */
    size_t per_thread;
    float *Di;          /* backward: (B, H_q, S_q) */
} attn_job;

/* Sequence b: its first rows in the operands (0 for fixed lengths, where the batch
 * stride separates sequences) and its lengths. */
typedef struct attn_seq {
    int64_t q0, kv0, n_q, n_kv;
} attn_seq;

static inline attn_seq seq_of(const cml_attention_desc *d, int64_t b) {
    attn_seq s = {0, 0, d->S_q, d->S_kv};
    if (d->cu_seqlens_q) {
        s.q0 = d->cu_seqlens_q[b], s.n_q = d->cu_seqlens_q[b + 1] - s.q0;
        s.kv0 = d->cu_seqlens_kv[b], s.n_kv = d->cu_seqlens_kv[b + 1] - s.kv0;
    }
    return s;
}

/* Keys of its sequence visible to query i. */
static inline int64_t visible(const cml_attention_desc *d, const attn_seq *sq, int64_t i) {
    if (!d->causal) return sq->n_kv;
    return max64(0, min64(sq->n_kv, i + sq->n_kv - sq->n_q + 1));
}

static inline int64_t off3(const int64_t stride[3], int64_t b, int64_t s, int64_t h) {
    return b * stride[0] + s * stride[1] + h * stride[2];
}

/* Row of D elements as f32: the data itself for f32, else converted into buf. */
static inline const float *row_f32(float *buf, const void *base, cml_dtype dt, int64_t off, int64_t D) {
    return cml__f32_view(buf, base, dt, off, 1, D);
}

static inline void load_row(float *dst, const void *base, cml_dtype dt, int64_t off, int64_t D) {
    if (dt == CML_F32) memcpy(dst, (const float *)base + off, (size_t)D * sizeof(float));
    else cml__load_f32(dst, base, dt, off, 1, D);
}

/* exp(x), ~1.4 ulp: Cody-Waite range reduction to r in [-ln2/2, ln2/2], Cephes'
 * degree-6 polynomial, 2^n from the exponent bits. x is clamped to [-87, 88]
 * first (so exp(-inf) is 1.6e-38, not 0; NaN passes through), by integer
 * compares on its bits: float compares would keep the compiler (trapping
 * math) from vectorizing the loops that call this. */
static inline float exp_f32(float x) {
    uint32_t ux;
    memcpy(&ux, &x, sizeof ux);
    uint32_t lo = 0u - (uint32_t)((ux > 0xC2AE0000u) & (ux <= 0xFF800000u)); /* -inf <= x < -87 */
    uint32_t hi = 0u - (uint32_t)((ux > 0x42B00000u) & (ux <= 0x7F800000u)); /* 88 < x <= inf */
    ux = (ux & ~(lo | hi)) | (0xC2AE0000u & lo) | (0x42B00000u & hi);
    memcpy(&x, &ux, sizeof x);
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer n, kept in the low bits */
    float t = x * 1.44269504088896341f + magic, n = t - magic;
    uint32_t ut;
    memcpy(&ut, &t, sizeof ut);
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t bits = (ut - 0x4B400000u + 127u) << 23; /* 2^n; unsigned, so a NaN's garbage is no UB */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline float dot(const float *a, const float *b, int64_t n) {
    float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) p[k] += a[j + k] * b[j + k];
    for (int k = 0; j < n; j++, k++) p[k] += a[j] * b[j];
    return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
}

/* Sum of x[0..n) in 8 interleaved partial sums. */
static inline float sum8(const float *x, int64_t n) {
    float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) p[k] += x[j + k];
    for (int k = 0; j < n; j++, k++) p[k] += x[j];
    return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
}

static inline void axpy(float *y, float a, const float *x, int64_t n) {
    for (int64_t j = 0; j < n; j++) y[j] += a * x[j];
}

/* y += (a0 x0 + a1 x1) + (a2 x2 + a3 x3): four rows per pass over y. */
static inline void axpy4(float *y, const float a[4], const float *x0, const float *x1, const float *x2,
                         const float *x3, int64_t n) {
    const float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    for (int64_t j = 0; j < n; j++) y[j] += (a0 * x0[j] + a1 * x1[j]) + (a2 * x2[j] + a3 * x3[j]);
}

/* y (D) += sum_jj coef[jj] * rows[jj] (rows (cnt, D)), in groups of four rows, then one by one. */
static inline void gemv_acc(float *y, const float *coef, const float *rows, int64_t cnt, int64_t D) {
    int64_t jj = 0;
    for (; jj + 4 <= cnt; jj += 4)
        axpy4(y, coef + jj, rows + jj * D, rows + (jj + 1) * D, rows + (jj + 2) * D, rows + (jj + 3) * D, D);
    for (; jj < cnt; jj++) axpy(y, coef[jj], rows + jj * D, D);
}

/* s[0..cnt) = scale * (q . kT[:, jj]) for a (D, ld) transposed tile, summed over d ascending. */
static inline void score_row(float *s, const float *q, const float *kT, int64_t D, int64_t cnt, int64_t ld,
                             float scale) {
    for (int64_t jj = 0; jj < cnt; jj++) s[jj] = 0.0f;
    for (int64_t c = 0; c < D; c++) {
        const float qc = q[c], *kc = kT + c * ld;
        for (int64_t jj = 0; jj < cnt; jj++) s[jj] += qc * kc[jj];
    }
    for (int64_t jj = 0; jj < cnt; jj++) s[jj] *= scale;
}

/* Rows j0..j0+cnt of (b, h) of X, transposed into tT (D, ld) and, when rows != NULL, copied to rows (cnt, D). */
static void load_tile(float *tT, float *rows, float *buf, const void *X, const int64_t stride[3], cml_dtype dt,
                      int64_t b, int64_t h, int64_t j0, int64_t cnt, int64_t D, int64_t ld) {
    for (int64_t jj = 0; jj < cnt; jj++) {
        const float *x = row_f32(buf, X, dt, off3(stride, b, j0 + jj, h), D);
        for (int64_t c = 0; c < D; c++) tT[c * ld + jj] = x[c];
        if (rows) memcpy(rows + jj * D, x, (size_t)D * sizeof(float));
    }
}

static float *thread_scratch(const attn_job *job) {
    return job->scratch + (size_t)omp_get_thread_num() * job->per_thread;
}

/* Gets nthreads slices of per_thread floats after `head` floats from the workspace. */
static cml_status get_scratch(cml_ctx *ctx, attn_job *job, size_t head, size_t per_thread, int nthreads) {
    job->per_thread = pad16(per_thread);
    size_t total = pad16(head) + job->per_thread * (size_t)nthreads;
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, total * sizeof(float)));
    job->Di = ws;
    job->scratch = (float *)ws + pad16(head);
    return CML_OK;
}

/* ---- forward ------------------------------------------------------------------ */

static size_t fwd_scratch(const cml_attention_desc *d) {
    return (size_t)(2 * QB * d->D + 2 * KT * d->D + d->D + QB * d->S_kv);
}

/* Query rows [i0, i0 + QB) of (b, h), those inside the sequence. */
static void fwd_task(const attn_job *job, void *O, float *lse, const void *Q, const void *K, const void *V,
                     int64_t b, int64_t h, int64_t i0) {
    const cml_attention_desc *d = job->d;
    const attn_seq sq = seq_of(d, b);
    if (i0 >= sq.n_q) return;
    const int64_t n = min64(QB, sq.n_q - i0);
    const int64_t D = d->D, S_kv = d->S_kv; /* S_kv: the scores' row pitch */
    const cml_dtype dt = d->dtype;
    const int64_t hk = h / job->group;
    float *q = thread_scratch(job), *acc = q + QB * D, *kT = acc + QB * D, *vrows = kT + KT * D;
    float *buf = vrows + KT * D, *scores = buf + D; /* scores: n x S_kv */
    int64_t vis[QB] = {0};
    for (int64_t r = 0; r < n; r++) {
        load_row(q + r * D, Q, dt, off3(d->q_stride, b, sq.q0 + i0 + r, h), D);
        vis[r] = visible(d, &sq, i0 + r);
    }
    int64_t jmax = vis[n - 1]; /* rows further down see more keys */
    for (int64_t j0 = 0; j0 < jmax; j0 += KT) {
        int64_t cnt = min64(KT, jmax - j0);
        load_tile(kT, NULL, buf, K, d->k_stride, dt, b, hk, sq.kv0 + j0, cnt, D, KT);
        for (int64_t r = 0; r < n; r++) {
            int64_t c = min64(cnt, vis[r] - j0);
            if (c > 0) score_row(scores + r * S_kv + j0, q + r * D, kT, D, c, KT, d->scale);
        }
    }
    float l[QB] = {0}, m[QB] = {0};
    for (int64_t r = 0; r < n; r++) {
        float *s = scores + r * S_kv, mx = -INFINITY;
        for (int64_t j = 0; j < vis[r]; j++) mx = s[j] > mx ? s[j] : mx;
        if (mx == -INFINITY) mx = 0.0f; /* all scores -inf (infinite inputs): no -inf - -inf */
        for (int64_t j = 0; j < vis[r]; j++) s[j] = exp_f32(s[j] - mx);
        m[r] = mx;
        l[r] = sum8(s, vis[r]);
    }
    memset(acc, 0, (size_t)(n * D) * sizeof(float));
    for (int64_t j0 = 0; j0 < jmax; j0 += KT) {
        int64_t cnt = min64(KT, jmax - j0);
        for (int64_t jj = 0; jj < cnt; jj++)
            load_row(vrows + jj * D, V, dt, off3(d->v_stride, b, sq.kv0 + j0 + jj, hk), D);
        for (int64_t r = 0; r < n; r++) {
            int64_t c = min64(cnt, vis[r] - j0);
            if (c > 0) gemv_acc(acc + r * D, scores + r * S_kv + j0, vrows, c, D);
        }
    }
    for (int64_t r = 0; r < n; r++) {
        int64_t i = i0 + r;
        float *o = acc + r * D;
        if (vis[r] > 0) {
            float inv = 1.0f / l[r];
            for (int64_t c = 0; c < D; c++) o[c] *= inv;
        }
        cml__store_f32(O, dt, off3(d->o_stride, b, sq.q0 + i, h), 1, o, D);
        if (lse) lse[(b * d->H_q + h) * d->S_q + i] = vis[r] > 0 ? m[r] + logf(l[r]) : -INFINITY;
    }
}

cml_status cml__attention_fwd_cpu(cml_ctx *ctx, const cml_attention_desc *desc, void *O, float *lse,
                                  const void *Q, const void *K, const void *V) {
    const cml_attention_desc *d = desc;
    int64_t blocks = (d->S_q + QB - 1) / QB, tasks = d->B * d->H_q * blocks;
    bool parallel = tasks > 1 && d->B * d->H_q * d->S_q * d->S_kv * d->D >= CML__PARALLEL_MIN;
    int nthreads = parallel ? omp_get_max_threads() : 1;
    attn_job job = {d, d->H_q / d->H_kv, NULL, 0, NULL};
    CML_TRY(get_scratch(ctx, &job, 0, fwd_scratch(d), nthreads));
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads) if (parallel)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t blk = t % blocks, bh = t / blocks, i0 = blk * QB;
        fwd_task(&job, O, lse, Q, K, V, bh / d->H_q, bh % d->H_q, i0);
    }
    return CML_OK;
}

/* ---- backward ------------------------------------------------------------------ */

static size_t dq_scratch(const cml_attention_desc *d) { return (size_t)(3 * QB * d->D + 3 * KT * d->D + 2 * KT + d->D); }
static size_t dkv_scratch(const cml_attention_desc *d) { return (size_t)(4 * KB * d->D + 8 * KB + 10 * d->D); }

/* Pass 1: dQ for query rows [i0, i0 + QB) of (b, h), those inside the sequence. */
static void dq_task(const attn_job *job, void *dQ, const void *dO, const void *Q, const void *K, const void *V,
                    const float *lse, int64_t b, int64_t h, int64_t i0) {
    const cml_attention_desc *d = job->d;
    const attn_seq sq = seq_of(d, b);
    if (i0 >= sq.n_q) return;
    const int64_t n = min64(QB, sq.n_q - i0);
    const int64_t D = d->D;
    const cml_dtype dt = d->dtype;
    const int64_t hk = h / job->group;
    float *q = thread_scratch(job), *dout = q + QB * D, *acc = dout + QB * D, *kT = acc + QB * D, *vT = kT + KT * D;
    float *krows = vT + KT * D, *s = krows + KT * D, *dp = s + KT, *buf = dp + KT;
    int64_t vis[QB] = {0};
    float L[QB] = {0}, Di[QB] = {0};
    for (int64_t r = 0; r < n; r++) {
        int64_t i = i0 + r, row = (b * d->H_q + h) * d->S_q + i;
        load_row(q + r * D, Q, dt, off3(d->q_stride, b, sq.q0 + i, h), D);
        load_row(dout + r * D, dO, dt, off3(d->o_stride, b, sq.q0 + i, h), D);
        vis[r] = visible(d, &sq, i);
        L[r] = lse[row];
        Di[r] = job->Di[row];
    }
    memset(acc, 0, (size_t)(n * D) * sizeof(float));
    for (int64_t j0 = 0; j0 < vis[n - 1]; j0 += KT) {
        int64_t cnt = min64(KT, vis[n - 1] - j0);
        load_tile(kT, krows, buf, K, d->k_stride, dt, b, hk, sq.kv0 + j0, cnt, D, KT);
        load_tile(vT, NULL, buf, V, d->v_stride, dt, b, hk, sq.kv0 + j0, cnt, D, KT);
        for (int64_t r = 0; r < n; r++) {
            int64_t c = min64(cnt, vis[r] - j0);
            if (c <= 0) continue;
            score_row(s, q + r * D, kT, D, c, KT, d->scale);
            score_row(dp, dout + r * D, vT, D, c, KT, 1.0f);
            for (int64_t jj = 0; jj < c; jj++) s[jj] = d->scale * exp_f32(s[jj] - L[r]) * (dp[jj] - Di[r]);
            gemv_acc(acc + r * D, s, krows, c, D);
        }
    }
    for (int64_t r = 0; r < n; r++)
        cml__store_f32(dQ, dt, off3(d->q_stride, b, sq.q0 + i0 + r, h), 1, acc + r * D, D);
}

/* Pass 2: dK and dV for key rows [j0, j0 + KB) of (b, hk) inside the sequence, over every
 * query head of its group. Query rows go in groups of four (probabilities 0 where a row
 * does not see a key, rows of zeros past the sequence end) so dK and dV are read and
 * written once per group. */
static void dkv_task(const attn_job *job, void *dK, void *dV, const void *dO, const void *Q, const void *K,
                     const void *V, const float *lse, int64_t b, int64_t hk, int64_t j0) {
    const cml_attention_desc *d = job->d;
    const attn_seq sq = seq_of(d, b);
    if (j0 >= sq.n_kv) return;
    const int64_t n = min64(KB, sq.n_kv - j0);
    const int64_t D = d->D;
    const cml_dtype dt = d->dtype;
    float *kT = thread_scratch(job), *vT = kT + KB * D, *dk = vT + KB * D, *dv = dk + KB * D, *p = dv + KB * D;
    float *ds = p + 4 * KB, *qrows = ds + 4 * KB, *dorows = qrows + 4 * D, *buf = dorows + 4 * D;
    load_tile(kT, NULL, buf, K, d->k_stride, dt, b, hk, sq.kv0 + j0, n, D, KB);
    load_tile(vT, NULL, buf, V, d->v_stride, dt, b, hk, sq.kv0 + j0, n, D, KB);
    memset(dk, 0, (size_t)(2 * KB * D) * sizeof(float)); /* dk and dv */
    /* The first query that sees key j0: visible(i) > j0. */
    int64_t i_first = d->causal ? max64(0, j0 - (sq.n_kv - sq.n_q)) : 0;
    for (int64_t h = hk * job->group; h < (hk + 1) * job->group; h++) {
        for (int64_t i0 = i_first; i0 < sq.n_q; i0 += 4) {
            int64_t cmax = 0;
            for (int g = 0; g < 4; g++) {
                int64_t i = i0 + g, c = i < sq.n_q ? min64(n, visible(d, &sq, i) - j0) : 0;
                float *pg = p + g * KB, *dsg = ds + g * KB, *q = qrows + g * D, *dout = dorows + g * D;
                if (c <= 0) {
                    memset(q, 0, (size_t)D * sizeof(float));
                    memset(dout, 0, (size_t)D * sizeof(float));
                    c = 0;
                } else {
                    int64_t row = (b * d->H_q + h) * d->S_q + i;
                    load_row(q, Q, dt, off3(d->q_stride, b, sq.q0 + i, h), D);
                    load_row(dout, dO, dt, off3(d->o_stride, b, sq.q0 + i, h), D);
                    float L = lse[row], Di = job->Di[row];
                    score_row(pg, q, kT, D, c, KB, d->scale);
                    score_row(dsg, dout, vT, D, c, KB, 1.0f);
                    for (int64_t jj = 0; jj < c; jj++) {
                        pg[jj] = exp_f32(pg[jj] - L);
                        dsg[jj] = d->scale * pg[jj] * (dsg[jj] - Di);
                    }
                }
                for (int64_t jj = c; jj < n; jj++) pg[jj] = dsg[jj] = 0.0f;
                cmax = max64(cmax, c);
            }
            for (int64_t jj = 0; jj < cmax; jj++) {
                const float pj[4] = {p[jj], p[KB + jj], p[2 * KB + jj], p[3 * KB + jj]};
                const float sj[4] = {ds[jj], ds[KB + jj], ds[2 * KB + jj], ds[3 * KB + jj]};
                axpy4(dv + jj * D, pj, dorows, dorows + D, dorows + 2 * D, dorows + 3 * D, D);
                axpy4(dk + jj * D, sj, qrows, qrows + D, qrows + 2 * D, qrows + 3 * D, D);
            }
        }
    }
    for (int64_t jj = 0; jj < n; jj++) {
        cml__store_f32(dK, dt, off3(d->k_stride, b, sq.kv0 + j0 + jj, hk), 1, dk + jj * D, D);
        cml__store_f32(dV, dt, off3(d->v_stride, b, sq.kv0 + j0 + jj, hk), 1, dv + jj * D, D);
    }
}

cml_status cml__attention_bwd_cpu(cml_ctx *ctx, const cml_attention_desc *desc, void *dQ, void *dK, void *dV,
                                  const void *dO, const void *Q, const void *K, const void *V, const void *O,
                                  const float *lse) {
    const cml_attention_desc *d = desc;
    const int64_t D = d->D, rows = d->B * d->H_q * d->S_q;
    int64_t qblocks = (d->S_q + QB - 1) / QB, kblocks = (d->S_kv + KB - 1) / KB;
    int64_t q_tasks = d->B * d->H_q * qblocks, kv_tasks = d->B * d->H_kv * kblocks;
    bool parallel = rows * d->S_kv * D >= CML__PARALLEL_MIN;
    int nthreads = parallel ? omp_get_max_threads() : 1;
    size_t need1 = dq_scratch(d), need2 = dkv_scratch(d);
    attn_job job = {d, d->H_q / d->H_kv, NULL, 0, NULL};
    CML_TRY(get_scratch(ctx, &job, (size_t)rows, need1 > need2 ? need1 : need2, nthreads));

#pragma omp parallel for schedule(static) num_threads(nthreads) if (parallel && rows > 1)
    for (int64_t row = 0; row < rows; row++) {
        int64_t i = row % d->S_q, bh = row / d->S_q, b = bh / d->H_q, h = bh % d->H_q;
        const attn_seq sq = seq_of(d, b);
        if (i >= sq.n_q) continue;
        float *buf = thread_scratch(&job);
        const float *o = row_f32(buf, O, d->dtype, off3(d->o_stride, b, sq.q0 + i, h), D);
        const float *g = row_f32(buf + D, dO, d->dtype, off3(d->o_stride, b, sq.q0 + i, h), D);
        job.Di[row] = dot(o, g, D);
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads) if (parallel && q_tasks > 1)
    for (int64_t t = 0; t < q_tasks; t++) {
        int64_t blk = t % qblocks, bh = t / qblocks, i0 = blk * QB;
        dq_task(&job, dQ, dO, Q, K, V, lse, bh / d->H_q, bh % d->H_q, i0);
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads) if (parallel && kv_tasks > 1)
    for (int64_t t = 0; t < kv_tasks; t++) {
        int64_t blk = t % kblocks, bh = t / kblocks, j0 = blk * KB;
        dkv_task(&job, dK, dV, dO, Q, K, V, lse, bh / d->H_kv, bh % d->H_kv, j0);
    }
    return CML_OK;
}
