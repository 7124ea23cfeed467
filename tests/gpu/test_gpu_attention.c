/* GPU tests of cml_attention_fwd / cml_attention_bwd against a float64
 * reference written here, on random inputs: sequence lengths 1, 7, 127, 129,
 * 1025 (S_q == S_kv and not, causal rows that see no key), head dims 32, 64,
 * 80, 128, 256 and an odd 33, GQA ratios 1, 2, 4 and MQA, four layouts
 * ([B,S,H,D] and [B,H,S,D], contiguous, padded with 16-byte aligned strides,
 * and padded with odd strides), f32, bf16 and f16, causal and not; each
 * 16-bit case through the public entry point (the tensor-core path) and the
 * SIMT path directly. Outputs are poisoned (0xFF: NaN) before every run; two
 * runs must be bitwise identical; the padding between output elements must
 * still hold the poison; results within the dtype's norm-wise tolerance
 * (f32 1e-5, 16-bit 1e-2; lse 1e-5). The backward is fed the reference's O
 * (rounded to the dtype) and lse, so its error is its own.
 * Then forward-only problems for the Hopper path (sm90: D 64/128/256, S 1..4097, GQA,
 * S_q != S_kv, the three TMA-compatible layouts, bf16 and f16): the test prints how many
 * forward cases took the sm90 path, checks through its launch counter that exactly the
 * cases it predicts ran there (twice each: O and lse poisoned, bitwise equal), and fails on
 * an sm_90 device when none did; a second counter likewise for the D = 64 kernel whose query
 * tiles end at S_q (QSHIFT: causal, S_q % 192 == 64 and S_q < 2048 by default), and a third for the
 * D = 256 kernel with the per-consumer Q prologue (PRO: causal, S_kv <= 512 by default). D = 256 causal up to
 * 4096 keys and full up to 512 run 128-key tiles (HALF on the causal diagonal and on a last tile of <= 64 keys:
 * 77 x 77, 1 x 300, 1000 x 1000 causal), the rest 80-key ones; CML_ATT_FWD_D256K128=0 / 1 in the environment
 * runs every case on one form (both were run so in session 16). The backward's
 * mma and sm90 launch counters likewise: every backward through cml_attention_bwd must run on the
 * path cml__attention_bwd_cuda_path_name predicts (twice), and on sm_80 / sm_90 every one with
 * D > 128 on a tensor-core path (sm_90: some on the wgmma one). Then variable-length (packed)
 * batches (cu_seqlens in device memory): empty sequences, length 1, lengths off the tiles,
 * S_q != S_kv per sequence, causal, GQA/MQA, D 33/64/80/128/256, every dtype, against each
 * sequence's float64 reference, NaN inputs outside the sequences, outputs outside them
 * untouched, repeat runs bitwise equal; and garbage offsets, which must run without a fault
 * or an access outside the buffers (memcheck). Then head dims the CUDA path refuses, and
 * timings (informational) at B=4, H=16, S=1024, D=64 and 256. Exits 77 ("skipped") without a
 * GPU. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <time.h>

#include "attention_places.h"
#include "gpu_row_util.h"

#ifndef CML_HAVE_CUDA
int main(void) {
    printf("skipped: built without CUDA\n");
    return 77;
}
#else
#include "kernels/cuda/attention/attention_sm90.h"
#include "kernels/cuda/cuda_kernels.h"

/* forward cases through the public entry point, those predicted on the sm90 path, and the
 * sm90 launches seen for them; of those, the cases predicted on (and seen running) the D = 64 kernel with
 * end-aligned query tiles (QSHIFT, cml__attention_fwd_sm90_q_shift) */
static int n_fwd_auto, n_fwd_sm90, n_fwd_sm90_runs, n_fwd_qshift, n_fwd_qshift_runs;
/* ... and on the D = 256 kernel with the PRO prologue (cml__attention_fwd_sm90_d256pro) */
static int n_fwd_pro, n_fwd_pro_runs;
/* 16-bit backward cases through the public entry point, those that ran on mma and on sm90 (all, D > 128) */
static int n_bwd_auto, n_bwd_mma, n_bwd_wide, n_bwd_wide_mma, n_bwd_wide_sm90, n_bwd_sm90;


/* ---- the float64 reference ------------------------------------------------------------------ */

typedef struct problem {
    cml_attention_desc d;
    place pq, pk, pv, po;
    void *q, *k, *v, *dout; /* host inputs in dtype (dO placed like O) */
    double *o, *lse;        /* forward reference: (B, S_q, H_q, D) and (B, H_q, S_q) */
    void *o_in;             /* o rounded to the dtype, placed like O: the backward's input */
    float *lse_in;          /* lse as f32 */
    double *dq, *dk, *dv;   /* backward reference, (B, S, H, D) */
    bool fwd_only;          /* no backward, no SIMT run */
} problem;

static double ld(const void *base, cml_dtype dt, int64_t i) { return (double)cml_dtype_load(base, dt, i); }

/* scale * q_i . k_j for (b, h) */
static double score(const problem *pr, int64_t b, int64_t h, int64_t i, int64_t j) {
    const cml_attention_desc *d = &pr->d;
    int64_t hk = h / (d->H_q / d->H_kv), qo = at(&pr->pq, b, i, h), ko = at(&pr->pk, b, j, hk);
    double s = 0;
    for (int64_t c = 0; c < d->D; c++) s += ld(pr->q, d->dtype, qo + c) * ld(pr->k, d->dtype, ko + c);
    return (double)d->scale * s;
}

static void reference_fwd(problem *pr) {
    const cml_attention_desc *d = &pr->d;
    const int64_t D = d->D, group = d->H_q / d->H_kv;
    double *s = malloc(sizeof(double) * (size_t)d->S_kv);
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->H_q; h++)
            for (int64_t i = 0; i < d->S_q; i++) {
                int64_t vis = visible(d, i);
                double *o = pr->o + ((b * d->S_q + i) * d->H_q + h) * D, m = -INFINITY, l = 0;
                for (int64_t c = 0; c < D; c++) o[c] = 0;
                for (int64_t j = 0; j < vis; j++) {
                    s[j] = score(pr, b, h, i, j);
                    if (s[j] > m) m = s[j];
                }
                for (int64_t j = 0; j < vis; j++) {
                    double p = exp(s[j] - m);
                    l += p;
                    int64_t vo = at(&pr->pv, b, j, h / group);
                    for (int64_t c = 0; c < D; c++) o[c] += p * ld(pr->v, d->dtype, vo + c);
                }
                for (int64_t c = 0; c < D; c++) o[c] = vis ? o[c] / l : 0.0;
                pr->lse[(b * d->H_q + h) * d->S_q + i] = vis ? m + log(l) : -INFINITY;
            }
    free(s);
}

/* From the backward's actual inputs: o_in (dtype) and lse_in (f32). */
static void reference_bwd(problem *pr) {
    const cml_attention_desc *d = &pr->d;
    const int64_t D = d->D, group = d->H_q / d->H_kv;
    const cml_dtype dt = d->dtype;
    memset(pr->dq, 0, sizeof(double) * (size_t)(d->B * d->S_q * d->H_q * D));
    memset(pr->dk, 0, sizeof(double) * (size_t)(d->B * d->S_kv * d->H_kv * D));
    memset(pr->dv, 0, sizeof(double) * (size_t)(d->B * d->S_kv * d->H_kv * D));
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->H_q; h++)
            for (int64_t i = 0; i < d->S_q; i++) {
                int64_t oo = at(&pr->po, b, i, h), qo = at(&pr->pq, b, i, h), vis = visible(d, i);
                double Di = 0, L = pr->lse_in[(b * d->H_q + h) * d->S_q + i];
                for (int64_t c = 0; c < D; c++) Di += ld(pr->dout, dt, oo + c) * ld(pr->o_in, dt, oo + c);
                double *dq = pr->dq + ((b * d->S_q + i) * d->H_q + h) * D;
                for (int64_t j = 0; j < vis; j++) {
                    int64_t ko = at(&pr->pk, b, j, h / group), vo = at(&pr->pv, b, j, h / group);
                    double p = exp(score(pr, b, h, i, j) - L), dp = 0;
                    for (int64_t c = 0; c < D; c++) dp += ld(pr->dout, dt, oo + c) * ld(pr->v, dt, vo + c);
                    double ds = p * (dp - Di);
                    double *dk = pr->dk + ((b * d->S_kv + j) * d->H_kv + h / group) * D;
                    double *dv = pr->dv + ((b * d->S_kv + j) * d->H_kv + h / group) * D;
                    for (int64_t c = 0; c < D; c++) {
                        dq[c] += d->scale * ds * ld(pr->k, dt, ko + c);
                        dk[c] += d->scale * ds * ld(pr->q, dt, qo + c);
                        dv[c] += p * ld(pr->dout, dt, oo + c);
                    }
                }
            }
}

/* ---- comparisons ---------------------------------------------------------------------------- */

/* got (placed, dtype) vs want (B, S, H, D) doubles, norm-wise; every element must be finite. */
static void compare_placed(const char *what, const void *got, const place *p, cml_dtype dt, const double *want,
                           int64_t B, int64_t S, int64_t H, int64_t D, double tol) {
    double num = 0, den = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t c = 0; c < D; c++) {
                    double g = ld(got, dt, at(p, b, s, h) + c), w = want[((b * S + s) * H + h) * D + c];
                    if (!isfinite(g)) {
                        CHECK_MSG(false, "%s: element (%lld, %lld, %lld, %lld) is %g (want %g)", what, (long long)b,
                                  (long long)s, (long long)h, (long long)c, g, w);
                        return;
                    }
                    num += (g - w) * (g - w);
                    den += w * w;
                }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    CHECK_MSG(rel <= tol, "%s: relative error %.3g > %.3g", what, rel, tol);
}

/* ---- one problem through one path -------------------------------------------------------------- */

enum { PATH_AUTO, PATH_SIMT };

typedef struct dev_bufs {
    void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
    float *lse;
} dev_bufs;

static cml_status run_fwd(int path, const problem *pr, const dev_bufs *g) {
    if (path == PATH_SIMT) return cml__attention_fwd_simt(gctx, &pr->d, g->o, g->lse, g->q, g->k, g->v);
    return cml_attention_fwd(gctx, &pr->d, g->o, g->lse, g->q, g->k, g->v);
}

static cml_status run_bwd(int path, const problem *pr, const dev_bufs *g) {
    if (path == PATH_SIMT)
        return cml__attention_bwd_simt(gctx, &pr->d, g->dq, g->dk, g->dv, g->dout, g->q, g->k, g->v, g->o, g->lse);
    return cml_attention_bwd(gctx, &pr->d, g->dq, g->dk, g->dv, g->dout, g->q, g->k, g->v, g->o, g->lse);
}

static void run_path(const problem *pr, int path, const char *tag) {
    const cml_attention_desc *d = &pr->d;
    const cml_dtype dt = d->dtype;
    const size_t es = cml_dtype_size(dt);
    const int64_t B = d->B, Hq = d->H_q, Hkv = d->H_kv, Sq = d->S_q, Skv = d->S_kv, D = d->D;
    const size_t nq = (size_t)pr->pq.n * es, nk = (size_t)pr->pk.n * es, nv = (size_t)pr->pv.n * es,
                 no = (size_t)pr->po.n * es, nl = sizeof(float) * (size_t)(B * Hq * Sq);
    char what[200];
    snprintf(what, sizeof what, "%s B=%lld Hq=%lld Hkv=%lld Sq=%lld Skv=%lld D=%lld %s %s", tag, (long long)B,
             (long long)Hq, (long long)Hkv, (long long)Sq, (long long)Skv, (long long)D,
             d->causal ? "causal" : "full", cml_dtype_name(dt));
    dev_bufs g = {dev_alloc(nq), dev_alloc(nk), dev_alloc(nv), dev_alloc(no), dev_alloc(no),
                  dev_alloc(nq), dev_alloc(nk), dev_alloc(nv), dev_alloc(nl)};
    size_t nmax = nq > nk ? nq : nk;
    nmax = nmax > nv ? nmax : nv;
    nmax = nmax > no ? nmax : no;
    unsigned char *got = malloc(nmax);
    float *lse = malloc(nl);
    double *lse_want = pr->lse;
    CHECK(g.q && g.k && g.v && g.o && g.dout && g.dq && g.dk && g.dv && g.lse && got && lse);
    if (g.q && g.k && g.v && g.o && g.dout && g.dq && g.dk && g.dv && g.lse && got && lse) {
        upload(g.q, pr->q, nq);
        upload(g.k, pr->k, nk);
        upload(g.v, pr->v, nv);
        upload(g.dout, pr->dout, no);
        /* forward: O and lse poisoned, twice, bitwise equal; the path it took */
        const char *fpath = path == PATH_SIMT ? "simt" : cml__attention_fwd_cuda_path_name(gctx, d, g.o, g.q, g.k, g.v);
        const long long runs0 = cml__attention_fwd_sm90_runs(), qs0 = cml__attention_fwd_sm90_qshift_runs();
        const long long pro0 = cml__attention_fwd_sm90_d256pro_runs();
        unsigned char *got2 = malloc(no);
        float *lse2 = malloc(nl);
        for (int r = 0; r < 2; r++) {
            poison(g.o, no);
            poison(g.lse, nl);
            CHECK_OK(run_fwd(path, pr, &g));
            download(r ? got2 : got, g.o, no);
            download(r ? lse2 : lse, g.lse, nl);
        }
        CHECK_MSG(memcmp(got, got2, no) == 0 && memcmp(lse, lse2, nl) == 0, "%s fwd (%s): a repeat run differs", what,
                  fpath);
        free(got2);
        free(lse2);
        const long long sm90_runs = cml__attention_fwd_sm90_runs() - runs0;
        const long long qs_runs = cml__attention_fwd_sm90_qshift_runs() - qs0;
        const long long pro_runs = cml__attention_fwd_sm90_d256pro_runs() - pro0;
        if (path == PATH_AUTO) {
            const bool sm90 = strcmp(fpath, "sm90") == 0;
            const bool qs = sm90 && cml__attention_fwd_sm90_q_shift(d) > 0;
            n_fwd_auto++;
            n_fwd_sm90 += sm90;
            n_fwd_sm90_runs += sm90 && sm90_runs == 2;
            n_fwd_qshift += qs;
            n_fwd_qshift_runs += qs && qs_runs == 2;
            CHECK_MSG(sm90_runs == (sm90 ? 2 : 0), "%s fwd: predicted path %s, but %lld sm90 launches for 2 runs", what,
                      fpath, sm90_runs);
            CHECK_MSG(qs_runs == (qs ? 2 : 0), "%s fwd: QSHIFT predicted %s, but %lld QSHIFT launches for 2 runs", what,
                      qs ? "yes" : "no", qs_runs);
            const bool pro = sm90 && cml__attention_fwd_sm90_d256pro(d);
            n_fwd_pro += pro;
            n_fwd_pro_runs += pro && pro_runs == 2;
            CHECK_MSG(pro_runs == (pro ? 2 : 0), "%s fwd: D = 256 PRO predicted %s, but %lld PRO launches for 2 runs",
                      what, pro ? "yes" : "no", pro_runs);
        } else {
            CHECK_MSG(qs_runs == 0, "%s fwd: %lld QSHIFT launches on the %s path", what, qs_runs, fpath);
            CHECK_MSG(pro_runs == 0, "%s fwd: %lld D = 256 PRO launches on the %s path", what, pro_runs, fpath);
        }
        double tol = dt == CML_F32 ? 1e-5 : 1e-2;
        char w2[240];
        snprintf(w2, sizeof w2, "%s fwd (%s) O", what, fpath);
        compare_placed(w2, got, &pr->po, dt, pr->o, B, Sq, Hq, D, tol);
        check_gaps(w2, got, &pr->po, es, B, Sq, Hq, D);
        double num = 0, den = 0;
        bool lse_ok = true;
        for (int64_t r = 0; r < B * Hq * Sq && lse_ok; r++) {
            if (isinf(lse_want[r]) && lse[r] == lse_want[r]) continue;
            if (!isfinite(lse[r])) lse_ok = false;
            num += (lse[r] - lse_want[r]) * (lse[r] - lse_want[r]);
            den += lse_want[r] * lse_want[r];
        }
        CHECK_MSG(lse_ok, "%s fwd: an lse is not finite where the reference's is", what);
        CHECK_MSG(sqrt(num / (den > 0 ? den : 1)) <= 1e-5, "%s fwd (%s) lse: relative error %.3g", what, fpath,
                  sqrt(num / (den > 0 ? den : 1)));
        if (pr->fwd_only) goto done;
        /* backward from the reference's O and lse */
        upload(g.o, pr->o_in, no);
        upload(g.lse, pr->lse_in, nl);
        const size_t nout[3] = {nq, nk, nv};
        void *outs[3] = {g.dq, g.dk, g.dv};
        const place *pl[3] = {&pr->pq, &pr->pk, &pr->pv};
        const double *want[3] = {pr->dq, pr->dk, pr->dv};
        const int64_t S[3] = {Sq, Skv, Skv}, H[3] = {Hq, Hkv, Hkv};
        unsigned char *first[3], *again[3];
        const char *bpath = path == PATH_SIMT ? "simt"
                                              : cml__attention_bwd_cuda_path_name(gctx, d, g.dq, g.dk, g.dv, g.dout,
                                                                                  g.q, g.k, g.v, g.o);
        const bool bmma = strcmp(bpath, "mma") == 0, bsm90 = strcmp(bpath, "sm90") == 0;
        const long long mma0 = cml__attention_bwd_mma_runs(), sm90b0 = cml__attention_bwd_sm90_runs();
        for (int r = 0; r < 2; r++) {
            for (int t = 0; t < 3; t++) poison(outs[t], nout[t]);
            CHECK_OK(run_bwd(path, pr, &g));
            for (int t = 0; t < 3; t++) {
                unsigned char *h = malloc(nout[t]);
                download(h, outs[t], nout[t]);
                if (r == 0) first[t] = h;
                else again[t] = h;
            }
        }
        const long long mma_runs = cml__attention_bwd_mma_runs() - mma0;
        const long long sm90b_runs = cml__attention_bwd_sm90_runs() - sm90b0;
        CHECK_MSG(mma_runs == (bmma ? 2 : 0) && sm90b_runs == (bsm90 ? 2 : 0),
                  "%s bwd: predicted path %s, but %lld mma and %lld sm90 launches for 2 runs", what, bpath, mma_runs,
                  sm90b_runs);
        if (path == PATH_AUTO && dt != CML_F32) {
            n_bwd_auto++, n_bwd_wide += D > 128, n_bwd_sm90 += sm90b_runs == 2;
            n_bwd_mma += mma_runs == 2, n_bwd_wide_mma += D > 128 && mma_runs == 2;
            n_bwd_wide_sm90 += D > 128 && sm90b_runs == 2;
        }
        static const char *const name[3] = {"dQ", "dK", "dV"};
        for (int t = 0; t < 3; t++) {
            snprintf(w2, sizeof w2, "%s bwd (%s) %s", what, bpath, name[t]);
            CHECK_MSG(memcmp(first[t], again[t], nout[t]) == 0, "%s: a repeat run differs", w2);
            compare_placed(w2, first[t], pl[t], dt, want[t], B, S[t], H[t], D, tol);
            check_gaps(w2, first[t], pl[t], es, B, S[t], H[t], D);
            free(first[t]);
            free(again[t]);
        }
    }
done:
    dev_free(g.q, nq), dev_free(g.k, nk), dev_free(g.v, nv), dev_free(g.o, no), dev_free(g.dout, no);
    dev_free(g.dq, nq), dev_free(g.dk, nk), dev_free(g.dv, nv), dev_free(g.lse, nl);
    free(got);
    free(lse);
}

typedef struct shape {
    int64_t B, Hq, Hkv, Sq, Skv, D;
} shape;

static void run_problem_opt(const shape *sh, bool causal, cml_dtype dt, int layout, bool fwd_only) {
    problem pr;
    memset(&pr, 0, sizeof pr);
    pr.fwd_only = fwd_only;
    pr.d = cml_attention_desc_bshd(sh->B, sh->Sq, sh->Skv, sh->Hq, sh->Hkv, sh->D, causal, dt);
    pr.d.scale *= 1.5f; /* not the default, and sharper distributions */
    pr.pq = make_place(layout, sh->B, sh->Sq, sh->Hq, sh->D);
    pr.po = make_place(layout, sh->B, sh->Sq, sh->Hq, sh->D);
    pr.pk = make_place(layout, sh->B, sh->Skv, sh->Hkv, sh->D);
    pr.pv = make_place(layout, sh->B, sh->Skv, sh->Hkv, sh->D);
    memcpy(pr.d.q_stride, pr.pq.st, sizeof pr.pq.st);
    memcpy(pr.d.o_stride, pr.po.st, sizeof pr.po.st);
    memcpy(pr.d.k_stride, pr.pk.st, sizeof pr.pk.st);
    memcpy(pr.d.v_stride, pr.pv.st, sizeof pr.pv.st);
    const size_t es = cml_dtype_size(dt);
    const int64_t nq_log = sh->B * sh->Sq * sh->Hq * sh->D, nk_log = sh->B * sh->Skv * sh->Hkv * sh->D;
    const int64_t rows = sh->B * sh->Hq * sh->Sq;
    pr.q = malloc((size_t)pr.pq.n * es), pr.k = malloc((size_t)pr.pk.n * es), pr.v = malloc((size_t)pr.pv.n * es);
    pr.dout = malloc((size_t)pr.po.n * es), pr.o_in = malloc((size_t)pr.po.n * es);
    pr.o = malloc(sizeof(double) * (size_t)nq_log), pr.lse = malloc(sizeof(double) * (size_t)rows);
    pr.lse_in = malloc(sizeof(float) * (size_t)rows);
    pr.dq = malloc(sizeof(double) * (size_t)nq_log), pr.dk = malloc(sizeof(double) * (size_t)nk_log);
    pr.dv = malloc(sizeof(double) * (size_t)nk_log);
    random_fill(pr.q, dt, pr.pq.n, -2.0f, 2.0f);
    random_fill(pr.k, dt, pr.pk.n, -2.0f, 2.0f);
    random_fill(pr.v, dt, pr.pv.n, -1.0f, 1.0f);
    random_fill(pr.dout, dt, pr.po.n, -1.0f, 1.0f);
    reference_fwd(&pr);
    memset(pr.o_in, 0, (size_t)pr.po.n * es);
    for (int64_t b = 0; b < sh->B; b++)
        for (int64_t s = 0; s < sh->Sq; s++)
            for (int64_t h = 0; h < sh->Hq; h++)
                for (int64_t c = 0; c < sh->D; c++)
                    cml_dtype_store(pr.o_in, dt, at(&pr.po, b, s, h) + c,
                                    (float)pr.o[((b * sh->Sq + s) * sh->Hq + h) * sh->D + c]);
    for (int64_t r = 0; r < rows; r++) pr.lse_in[r] = (float)pr.lse[r];
    if (!fwd_only) reference_bwd(&pr);
    char tag[64];
    snprintf(tag, sizeof tag, "%s %s", LAYOUT_NAME[layout], dt == CML_F32 ? "simt" : "auto");
    run_path(&pr, PATH_AUTO, tag);
    if (dt != CML_F32 && !fwd_only) {
        snprintf(tag, sizeof tag, "%s simt", LAYOUT_NAME[layout]);
        run_path(&pr, PATH_SIMT, tag);
    }
    free(pr.q), free(pr.k), free(pr.v), free(pr.dout), free(pr.o_in), free(pr.o), free(pr.lse), free(pr.lse_in);
    free(pr.dq), free(pr.dk), free(pr.dv);
}

static void run_problem(const shape *sh, bool causal, cml_dtype dt, int layout) {
    run_problem_opt(sh, causal, dt, layout, false);
}

/* ---- the sweep ------------------------------------------------------------------------------- */

static const shape SHAPES[] = {
    {2, 2, 2, 1, 1, 64},      /* one query, one key */
    {1, 3, 3, 7, 7, 32},      /* a partial tile */
    {2, 4, 2, 127, 127, 64},  /* GQA 2 */
    {1, 4, 1, 129, 129, 80},  /* MQA, D not a power of two */
    {1, 8, 2, 129, 127, 128}, /* GQA 4, S_q > S_kv: causal rows without keys */
    {1, 2, 1, 127, 129, 256}, /* MQA, the largest head */
    {2, 2, 2, 7, 1025, 128},  /* decode-like: few queries, many keys */
    {1, 1, 1, 129, 127, 33},  /* odd D: no vector loads */
    {2, 4, 1, 130, 67, 192},  /* MQA 4, a head dim the D = 256 kernels pad, S_q > S_kv */
    {1, 2, 2, 1025, 1025, 64},
    {1, 2, 1, 1025, 129, 256},
    {1, 2, 2, 1, 1025, 256},
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0], N_LARGE = 3 /* the last ones (1025 long), left out under the sanitizer */ };

/* Under the sanitizer: the shapes up to 129 long, one of causal / full each. */
static void test_sweep(void) {
    const bool san = under_sanitizer();
    for (int s = 0; s < N_SHAPES; s++)
        for (int di = 0; di < n_test_dtypes(); di++)
            for (int causal = 0; causal < 2; causal++) {
                if (san && (s == 6 || s >= N_SHAPES - N_LARGE || causal != s % 2)) continue;
                int before = th_failed_checks;
                run_problem(&SHAPES[s], causal, TEST_DTYPES[di], (s + di + causal) % N_LAYOUTS);
                if (th_failed_checks != before) printf("  (shape %d, %s, causal %d failed)\n", s,
                                                       cml_dtype_name(TEST_DTYPES[di]), causal);
            }
}

/* Every layout for one mid-size shape, so each is seen with each dtype. */
static void test_layouts(void) {
    const shape sh = {2, 4, 2, 65, 67, 64};
    for (int layout = 0; layout < N_LAYOUTS; layout++)
        for (int di = 0; di < n_test_dtypes(); di++) run_problem(&sh, layout % 2 == 1, TEST_DTYPES[di], layout);
}

/* Forward-only problems for the Hopper path: the shapes of issue 6 (D 64/128/256, odd S up to
 * 4097, GQA and MQA, S_q != S_kv both ways, causal rows that see no key), bf16 and f16, in the
 * layouts TMA takes ([B,S,H,D], [B,H,S,D], padded with 16-byte strides). Under the sanitizer
 * only those up to 300 long, bf16. */
static const shape SM90_SHAPES[] = {
    {1, 2, 2, 1, 1, 128},     {2, 4, 2, 77, 77, 64},    {1, 4, 1, 1000, 1000, 128}, {2, 2, 2, 77, 300, 128},
    {1, 4, 2, 300, 77, 64},   {1, 2, 2, 1000, 1000, 256}, {1, 2, 1, 129, 1025, 256}, {3, 2, 1, 513, 513, 128},
    /* D = 64 (192-row tiles) with S_kv > S_q over several key tiles: causal consumers end their key
     * loops at different tiles (session-10 review) */
    {2, 2, 1, 77, 300, 64},   {1, 2, 2, 200, 1000, 64},
    /* D = 64 causal with S_q % 192 == 64: the query tiles end at S_q (QSHIFT; the first one holds 64 rows): the
     * shifted kernel's own shapes, GQA / MQA, S_q < S_kv (256 x 300, also under the sanitizer) and S_q > S_kv
     * (rows without keys); full attention there is the unshifted kernel (a control) */
    {1, 2, 2, 256, 256, 64},  {1, 4, 1, 256, 300, 64},  {2, 2, 1, 640, 640, 64},  {1, 2, 2, 640, 250, 64},
    /* D = 256 causal with S_kv <= 512: the PRO prologue (Q in per-consumer 64-row halves); the last query tile
     * with a second half partly (77 x 77 GQA, 300 x 65: tiles without keys too) or wholly past S_q (1 x 300 MQA:
     * its barrier gets a plain arrival), the bench's S = 512 with four query tiles; 200 x 1000 (S_q < S_kv) and
     * full attention run the base kernel (controls; CML_ATT_FWD_D256PRO=1 takes them too) */
    {2, 4, 2, 77, 77, 256},   {1, 4, 1, 1, 300, 256},   {1, 2, 2, 300, 65, 256},  {2, 2, 2, 512, 512, 256},
    {1, 2, 1, 200, 1000, 256},
    {1, 1, 1, 4097, 4097, 64}, /* causal only */
};
enum { N_SM90_SHAPES = sizeof SM90_SHAPES / sizeof SM90_SHAPES[0] };

/* CML_TEST_SM90_D=<D> keeps only the shapes of that head dim (sanitizer runs of one kernel). */
static void test_sm90_fwd(void) {
    const bool san = under_sanitizer();
    const char *only_d = getenv("CML_TEST_SM90_D");
    static const int layouts[3] = {LAYOUT_BSHD, LAYOUT_BHSD, LAYOUT_BSHD_PAD8};
    int k = 0;
    for (int s = 0; s < N_SM90_SHAPES; s++)
        for (int di = 1; di < (san ? 2 : N_TEST_DTYPES); di++)
            for (int causal = 0; causal < 2; causal++) {
                const shape *sh = &SM90_SHAPES[s];
                if (san && (sh->Sq > 300 || sh->Skv > 300)) continue;
                if (only_d && sh->D != atoi(only_d)) continue;
                if (s == N_SM90_SHAPES - 1 && !causal) continue;
                int before = th_failed_checks;
                run_problem_opt(sh, causal, TEST_DTYPES[di], layouts[k++ % 3], true);
                if (th_failed_checks != before)
                    printf("  (sm90 shape %d, %s, causal %d failed)\n", s, cml_dtype_name(TEST_DTYPES[di]), causal);
            }
}

/* ---- variable-length (packed) batches ----------------------------------------------------------
 * Sequence b is rows cu[b] .. cu[b + 1] - 1 of packed operands (row stride H D + pad, head stride D,
 * batch stride 0), the offsets in device memory. The reference runs each sequence alone (B = 1)
 * through reference_fwd / reference_bwd above, placed at its rows. Inputs outside the sequences
 * (row gaps, the tail rows, lse entries past a sequence's length) are NaN, so a read there shows
 * in the outputs; outputs outside must keep their poison. */

#define VL_MAX_B 6
#define VL_TAIL 3 /* rows of the packed buffers past the last sequence */

typedef struct vl_shape {
    int B, Hq, Hkv, D;
    int n_q[VL_MAX_B], n_kv[VL_MAX_B];
    int extra; /* S_q, S_kv: the longest sequences plus this (the bounds need not be reached) */
} vl_shape;

static const vl_shape VL_SHAPES[] = {
    {5, 4, 2, 64, {1, 0, 129, 7, 65}, {1, 5, 127, 0, 200}, 0},   /* empty, length 1, no keys, GQA 2 */
    {3, 2, 1, 128, {63, 200, 1}, {130, 64, 17}, 3},               /* MQA, S_q >< S_kv per sequence */
    {4, 2, 2, 256, {33, 0, 100, 2}, {70, 1, 99, 2}, 1},           /* the largest head */
    {2, 3, 3, 33, {50, 17}, {17, 50}, 0},                         /* odd D: no vector loads */
    {6, 4, 1, 80, {1, 2, 3, 64, 65, 0}, {3, 2, 1, 64, 66, 0}, 2}, /* D the kernels pad, MQA 4 */
    {3, 2, 1, 128, {700, 260, 513}, {520, 700, 1}, 0},            /* long (left out under the sanitizer) */
};
enum { N_VL_SHAPES = sizeof VL_SHAPES / sizeof VL_SHAPES[0] };

static int n_vl_auto, n_vl_sm90; /* 16-bit varlen forwards through cml_attention_fwd, those predicted on sm90 */

/* got (packed: `rows` rows of H D elements, row stride rs) vs want ((rows, H, D) doubles), norm-wise, all finite. */
static void compare_packed(const char *what, const void *got, int64_t rs, cml_dtype dt, const double *want,
                           int64_t rows, int64_t HD, double tol) {
    double num = 0, den = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t e = 0; e < HD; e++) {
            double g = ld(got, dt, r * rs + e), w = want[r * HD + e];
            if (!isfinite(g)) {
                CHECK_MSG(false, "%s: row %lld element %lld is %g (want %g)", what, (long long)r, (long long)e, g, w);
                return;
            }
            num += (g - w) * (g - w);
            den += w * w;
        }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    CHECK_MSG(rel <= tol, "%s: relative error %.3g > %.3g", what, rel, tol);
}

/* Every byte of a packed buffer (all_rows x rs elements) outside rows [0, rows) x [0, HD) still 0xFF. */
static void check_packed_gaps(const char *what, const unsigned char *buf, int64_t all_rows, int64_t rs, int64_t rows,
                              int64_t HD, size_t es) {
    for (int64_t r = 0; r < all_rows; r++)
        for (int64_t e = r < rows ? HD : 0; e < rs; e++)
            for (size_t k = 0; k < es; k++)
                if (buf[(size_t)(r * rs + e) * es + k] != 0xFF) {
                    CHECK_MSG(false, "%s: row %lld element %lld (outside the sequences) was written", what,
                              (long long)r, (long long)e);
                    return;
                }
}

typedef struct vl_problem {
    cml_attention_desc d; /* cu pointers: device */
    int32_t cu_q[VL_MAX_B + 1], cu_kv[VL_MAX_B + 1];
    int64_t tq, tkv, rsq, rskv; /* rows and row strides of the packed buffers */
    void *q, *k, *v, *dout, *o_in; /* host, dtype, packed; NaN outside the sequences */
    double *o, *dq, *dk, *dv;       /* reference, (rows, H, D) over the sequences' rows */
    double *lse;                    /* reference (B, H_q, S_q) */
    float *lse_in;                  /* the backward's lse: f32, NaN past each sequence */
} vl_problem;

/* The reference of sequence b alone, placed at its rows; o_in and lse_in from its forward. */
static void vl_reference_seq(vl_problem *vp, int b) {
    const cml_attention_desc *d = &vp->d;
    const cml_dtype dt = d->dtype;
    const size_t es = cml_dtype_size(dt);
    const int64_t Hq = d->H_q, Hkv = d->H_kv, D = d->D;
    const int64_t q0 = vp->cu_q[b], kv0 = vp->cu_kv[b], nq = vp->cu_q[b + 1] - q0, nkv = vp->cu_kv[b + 1] - kv0;
    if (nq == 0) return; /* its keys' gradients stay 0 */
    problem pr;
    memset(&pr, 0, sizeof pr);
    pr.d = cml_attention_desc_bshd(1, nq, nkv > 0 ? nkv : 1, Hq, Hkv, D, d->causal, dt);
    pr.d.scale = d->scale;
    const place pq = {{0, vp->rsq, D}, 0}, pk = {{0, vp->rskv, D}, 0};
    pr.pq = pr.po = pq, pr.pk = pr.pv = pk;
    pr.q = (char *)vp->q + (size_t)(q0 * vp->rsq) * es, pr.dout = (char *)vp->dout + (size_t)(q0 * vp->rsq) * es;
    pr.o_in = (char *)vp->o_in + (size_t)(q0 * vp->rsq) * es;
    pr.k = (char *)vp->k + (size_t)(kv0 * vp->rskv) * es, pr.v = (char *)vp->v + (size_t)(kv0 * vp->rskv) * es;
    pr.o = vp->o + q0 * Hq * D, pr.dq = vp->dq + q0 * Hq * D;
    pr.dk = vp->dk + kv0 * Hkv * D, pr.dv = vp->dv + kv0 * Hkv * D;
    pr.lse = malloc(sizeof(double) * (size_t)(Hq * nq));
    pr.lse_in = malloc(sizeof(float) * (size_t)(Hq * nq));
    if (nkv > 0) {
        reference_fwd(&pr);
    } else { /* no key: O = 0, lse = -inf */
        memset(pr.o, 0, sizeof(double) * (size_t)(nq * Hq * D));
        for (int64_t r = 0; r < Hq * nq; r++) pr.lse[r] = -INFINITY;
    }
    for (int64_t h = 0; h < Hq; h++)
        for (int64_t i = 0; i < nq; i++) {
            const int64_t at = (b * Hq + h) * d->S_q + i;
            vp->lse[at] = pr.lse[h * nq + i];
            vp->lse_in[at] = pr.lse_in[h * nq + i] = (float)pr.lse[h * nq + i];
            for (int64_t c = 0; c < D; c++)
                cml_dtype_store(vp->o_in, dt, (q0 + i) * vp->rsq + h * D + c, (float)pr.o[(i * Hq + h) * D + c]);
        }
    if (nkv > 0) reference_bwd(&pr); /* else dQ stays 0 */
    free(pr.lse);
    free(pr.lse_in);
}

static void vl_build(vl_problem *vp, const vl_shape *vs, bool causal, cml_dtype dt) {
    memset(vp, 0, sizeof *vp);
    int64_t smax_q = 1, smax_kv = 1;
    for (int b = 0; b < vs->B; b++) {
        vp->cu_q[b + 1] = vp->cu_q[b] + vs->n_q[b];
        vp->cu_kv[b + 1] = vp->cu_kv[b] + vs->n_kv[b];
        smax_q = vs->n_q[b] > smax_q ? vs->n_q[b] : smax_q;
        smax_kv = vs->n_kv[b] > smax_kv ? vs->n_kv[b] : smax_kv;
    }
    const int64_t D = vs->D, pad = D % 8 ? 3 : 8, nq = vp->cu_q[vs->B], nkv = vp->cu_kv[vs->B];
    vp->tq = nq + VL_TAIL, vp->tkv = nkv + VL_TAIL;
    vp->rsq = vs->Hq * D + pad, vp->rskv = vs->Hkv * D + pad;
    cml_attention_desc *d = &vp->d;
    *d = cml_attention_desc_bshd(vs->B, smax_q + vs->extra, smax_kv + vs->extra, vs->Hq, vs->Hkv, D, causal, dt);
    d->scale *= 1.5f;
    d->q_stride[0] = d->o_stride[0] = 0, d->q_stride[1] = d->o_stride[1] = vp->rsq, d->q_stride[2] = d->o_stride[2] = D;
    d->k_stride[0] = d->v_stride[0] = 0, d->k_stride[1] = d->v_stride[1] = vp->rskv, d->k_stride[2] = d->v_stride[2] = D;
    d->total_q = vp->tq, d->total_kv = vp->tkv;
    const size_t es = cml_dtype_size(dt), bq = (size_t)(vp->tq * vp->rsq) * es, bkv = (size_t)(vp->tkv * vp->rskv) * es;
    vp->q = malloc(bq), vp->dout = malloc(bq), vp->o_in = malloc(bq), vp->k = malloc(bkv), vp->v = malloc(bkv);
    void *ins[5] = {vp->q, vp->dout, vp->o_in, vp->k, vp->v};
    for (int i = 0; i < 5; i++) memset(ins[i], 0xFF, i < 3 ? bq : bkv);
    for (int64_t r = 0; r < nq; r++)
        for (int64_t e = 0; e < vs->Hq * D; e++) {
            cml_dtype_store(vp->q, dt, r * vp->rsq + e, uniform(-2.0f, 2.0f));
            cml_dtype_store(vp->dout, dt, r * vp->rsq + e, uniform(-1.0f, 1.0f));
        }
    for (int64_t r = 0; r < nkv; r++)
        for (int64_t e = 0; e < vs->Hkv * D; e++) {
            cml_dtype_store(vp->k, dt, r * vp->rskv + e, uniform(-2.0f, 2.0f));
            cml_dtype_store(vp->v, dt, r * vp->rskv + e, uniform(-1.0f, 1.0f));
        }
    const int64_t nl = vs->B * vs->Hq * d->S_q;
    vp->o = calloc((size_t)(nq * vs->Hq * D) + 1, sizeof(double));
    vp->dq = calloc((size_t)(nq * vs->Hq * D) + 1, sizeof(double));
    vp->dk = calloc((size_t)(nkv * vs->Hkv * D) + 1, sizeof(double));
    vp->dv = calloc((size_t)(nkv * vs->Hkv * D) + 1, sizeof(double));
    vp->lse = calloc((size_t)nl, sizeof(double));
    vp->lse_in = malloc(sizeof(float) * (size_t)nl);
    memset(vp->lse_in, 0xFF, sizeof(float) * (size_t)nl);
    for (int b = 0; b < vs->B; b++) vl_reference_seq(vp, b);
}

static void vl_free(vl_problem *vp) {
    free(vp->q), free(vp->k), free(vp->v), free(vp->dout), free(vp->o_in);
    free(vp->o), free(vp->dq), free(vp->dk), free(vp->dv), free(vp->lse), free(vp->lse_in);
}

/* One varlen problem through one path: forward and backward twice each on poisoned outputs. */
static void vl_run_path(vl_problem *vp, int path, const char *what) {
    cml_attention_desc *d = &vp->d;
    const cml_dtype dt = d->dtype;
    const size_t es = cml_dtype_size(dt), bq = (size_t)(vp->tq * vp->rsq) * es, bkv = (size_t)(vp->tkv * vp->rskv) * es;
    const int64_t B = d->B, Hq = d->H_q, nl = B * Hq * d->S_q, nq = vp->cu_q[B], nkv = vp->cu_kv[B];
    const size_t bl = sizeof(float) * (size_t)nl, bcu = sizeof(int32_t) * (size_t)(B + 1);
    /* buffers of exactly total rows: memcheck sees any access past them */
    dev_bufs g = {dev_alloc(bq), dev_alloc(bkv), dev_alloc(bkv), dev_alloc(bq), dev_alloc(bq),
                  dev_alloc(bq), dev_alloc(bkv), dev_alloc(bkv), dev_alloc(bl)};
    int32_t *cuq = dev_alloc(bcu), *cukv = dev_alloc(bcu);
    unsigned char *got = malloc(bq > bkv ? bq : bkv), *again = malloc(bq > bkv ? bq : bkv);
    float *lse = malloc(bl), *lse2 = malloc(bl);
    CHECK(g.q && g.k && g.v && g.o && g.dout && g.dq && g.dk && g.dv && g.lse && cuq && cukv);
    if (!(g.q && g.k && g.v && g.o && g.dout && g.dq && g.dk && g.dv && g.lse && cuq && cukv)) goto done;
    upload(g.q, vp->q, bq), upload(g.k, vp->k, bkv), upload(g.v, vp->v, bkv), upload(g.dout, vp->dout, bq);
    upload(cuq, vp->cu_q, bcu), upload(cukv, vp->cu_kv, bcu);
    d->cu_seqlens_q = cuq, d->cu_seqlens_kv = cukv;
    problem pr; /* run_fwd / run_bwd take the descriptor from a problem */
    memset(&pr, 0, sizeof pr);
    pr.d = *d;
    const double tol = tol_for(dt);
    char w2[260];
    {
        const char *fpath = path == PATH_SIMT ? "simt" : cml__attention_fwd_cuda_path_name(gctx, d, g.o, g.q, g.k, g.v);
        const long long sm90_0 = cml__attention_fwd_sm90_runs();
        for (int r = 0; r < 2; r++) {
            poison(g.o, bq), poison(g.lse, bl);
            CHECK_OK(run_fwd(path, &pr, &g));
            download(r ? again : got, g.o, bq);
            download(r ? lse2 : lse, g.lse, bl);
        }
        snprintf(w2, sizeof w2, "%s fwd (%s)", what, fpath);
        CHECK_MSG(memcmp(got, again, bq) == 0 && memcmp(lse, lse2, bl) == 0, "%s: a repeat run differs", w2);
        if (path == PATH_AUTO && dt != CML_F32) n_vl_auto++, n_vl_sm90 += strcmp(fpath, "sm90") == 0;
        CHECK_MSG(cml__attention_fwd_sm90_runs() == sm90_0, "%s: ran on the sm90 path, which declines varlen", w2);
        compare_packed(w2, got, vp->rsq, dt, vp->o, nq, Hq * d->D, tol);
        check_packed_gaps(w2, got, vp->tq, vp->rsq, nq, Hq * d->D, es);
        double num = 0, den = 0;
        bool ok = true, kept = true;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < d->S_q; i++) {
                    const int64_t at = (b * Hq + h) * d->S_q + i;
                    uint32_t bits;
                    memcpy(&bits, &lse[at], 4);
                    if (i >= vp->cu_q[b + 1] - vp->cu_q[b]) {
                        kept &= bits == 0xFFFFFFFFu;
                        continue;
                    }
                    if (isinf(vp->lse[at]) && lse[at] == vp->lse[at]) continue;
                    ok &= isfinite(lse[at]) != 0;
                    num += (lse[at] - vp->lse[at]) * (lse[at] - vp->lse[at]);
                    den += vp->lse[at] * vp->lse[at];
                }
        CHECK_MSG(ok, "%s lse: not finite where the reference's is", w2);
        CHECK_MSG(kept, "%s lse: an entry past its sequence was written", w2);
        CHECK_MSG(sqrt(num / (den > 0 ? den : 1)) <= 1e-5, "%s lse: relative error %.3g", w2,
                  sqrt(num / (den > 0 ? den : 1)));
    }
    {
        upload(g.o, vp->o_in, bq);
        upload(g.lse, vp->lse_in, bl);
        void *outs[3] = {g.dq, g.dk, g.dv};
        const size_t nb[3] = {bq, bkv, bkv};
        const double *want[3] = {vp->dq, vp->dk, vp->dv};
        const int64_t rows[3] = {nq, nkv, nkv}, all[3] = {vp->tq, vp->tkv, vp->tkv};
        const int64_t rs[3] = {vp->rsq, vp->rskv, vp->rskv}, HD[3] = {Hq * d->D, d->H_kv * d->D, d->H_kv * d->D};
        static const char *const name[3] = {"dQ", "dK", "dV"};
        const bool bmma = path == PATH_AUTO && cml__attention_mma_takes(gctx, d, true);
        const long long mma0 = cml__attention_bwd_mma_runs(), sm90b0 = cml__attention_bwd_sm90_runs();
        unsigned char *first[3];
        for (int t = 0; t < 3; t++) first[t] = malloc(nb[t]);
        for (int r = 0; r < 2; r++) {
            for (int t = 0; t < 3; t++) poison(outs[t], nb[t]);
            CHECK_OK(run_bwd(path, &pr, &g));
            for (int t = 0; t < 3; t++) {
                download(r ? again : first[t], outs[t], nb[t]);
                if (r) CHECK_MSG(memcmp(first[t], again, nb[t]) == 0, "%s bwd %s: a repeat run differs", what, name[t]);
            }
        }
        const long long mma_runs = cml__attention_bwd_mma_runs() - mma0;
        CHECK_MSG(mma_runs == (bmma ? 2 : 0), "%s bwd: predicted path %s, but %lld mma launches for 2 runs", what,
                  bmma ? "mma" : "simt", mma_runs);
        CHECK_MSG(cml__attention_bwd_sm90_runs() == sm90b0, "%s bwd: ran on the sm90 path, which declines varlen",
                  what);
        for (int t = 0; t < 3; t++) {
            snprintf(w2, sizeof w2, "%s bwd (%s) %s", what, bmma ? "mma" : "simt", name[t]);
            compare_packed(w2, first[t], rs[t], dt, want[t], rows[t], HD[t], tol);
            check_packed_gaps(w2, first[t], all[t], rs[t], rows[t], HD[t], es);
            free(first[t]);
        }
    }
done:
    d->cu_seqlens_q = d->cu_seqlens_kv = NULL;
    dev_free(g.q, bq), dev_free(g.k, bkv), dev_free(g.v, bkv), dev_free(g.o, bq), dev_free(g.dout, bq);
    dev_free(g.dq, bq), dev_free(g.dk, bkv), dev_free(g.dv, bkv), dev_free(g.lse, bl);
    dev_free(cuq, bcu), dev_free(cukv, bcu);
    free(got), free(again), free(lse), free(lse2);
}

/* Every varlen shape, causal and not, each dtype; 16-bit also on the SIMT path. Under the
 * sanitizer: not the long shape, bf16 and f32 only. */
static void test_varlen(void) {
    const bool san = under_sanitizer();
    for (int s = 0; s < N_VL_SHAPES; s++)
        for (int di = 0; di < n_test_dtypes(); di++)
            for (int causal = 0; causal < 2; causal++) {
                if (san && s == N_VL_SHAPES - 1) continue;
                const vl_shape *vs = &VL_SHAPES[s];
                vl_problem vp;
                vl_build(&vp, vs, causal, TEST_DTYPES[di]);
                char what[160];
                int before = th_failed_checks;
                snprintf(what, sizeof what, "varlen shape %d B=%d Hq=%d Hkv=%d D=%d %s %s", s, vs->B, vs->Hq, vs->Hkv,
                         vs->D, causal ? "causal" : "full", cml_dtype_name(TEST_DTYPES[di]));
                vl_run_path(&vp, PATH_AUTO, what);
                if (TEST_DTYPES[di] != CML_F32) {
                    snprintf(what, sizeof what, "varlen shape %d %s %s simt", s, causal ? "causal" : "full",
                             cml_dtype_name(TEST_DTYPES[di]));
                    vl_run_path(&vp, PATH_SIMT, what);
                }
                if (th_failed_checks != before)
                    printf("  (varlen shape %d, %s, causal %d failed)\n", s, cml_dtype_name(TEST_DTYPES[di]), causal);
                vl_free(&vp);
            }
    printf("varlen: %d 16-bit forwards through cml_attention_fwd, %d predicted on sm90 (must be 0)\n", n_vl_auto,
           n_vl_sm90);
    CHECK(n_vl_sm90 == 0);
}

/* Offsets are data the host does not check on CUDA: garbage ones (decreasing, negative, past
 * the buffers, INT32_MAX) must still run without an access outside the buffers (which hold
 * exactly total_q / total_kv rows; compute-sanitizer memcheck watches) and without a fault. */
static void test_varlen_bad_offsets(void) {
    static const int32_t bad_q[6] = {0, 100000, -5, 7, INT32_MAX, 3}, bad_kv[6] = {-7, 9, 2, 2147483000, 1, 12};
    for (int di = 0; di < 2; di++) {
        const cml_dtype dt = di ? CML_BF16 : CML_F32;
        const int64_t B = 5, H = 2, D = 64, tq = 10, tkv = 12;
        cml_attention_desc d = cml_attention_desc_bshd(B, 9, 11, H, H, D, true, dt);
        d.q_stride[0] = d.k_stride[0] = d.v_stride[0] = d.o_stride[0] = 0;
        d.total_q = tq, d.total_kv = tkv;
        const size_t es = cml_dtype_size(dt), bq = (size_t)(tq * H * D) * es, bkv = (size_t)(tkv * H * D) * es;
        const size_t bl = sizeof(float) * (size_t)(B * H * d.S_q), bcu = sizeof bad_q;
        void *q = dev_alloc(bq), *o = dev_alloc(bq), *dout = dev_alloc(bq), *dq = dev_alloc(bq);
        void *k = dev_alloc(bkv), *v = dev_alloc(bkv), *dk = dev_alloc(bkv), *dv = dev_alloc(bkv);
        float *lse = dev_alloc(bl);
        int32_t *cuq = dev_alloc(bcu), *cukv = dev_alloc(bcu);
        CHECK(q && o && dout && dq && k && v && dk && dv && lse && cuq && cukv);
        if (q && o && dout && dq && k && v && dk && dv && lse && cuq && cukv) {
            void *h = malloc(bq > bkv ? bq : bkv);
            random_fill(h, dt, tkv * H * D, -1.0f, 1.0f);
            upload(q, h, bq), upload(dout, h, bq), upload(k, h, bkv), upload(v, h, bkv);
            upload(cuq, bad_q, bcu), upload(cukv, bad_kv, bcu);
            free(h);
            d.cu_seqlens_q = cuq, d.cu_seqlens_kv = cukv;
            CHECK_OK(cml_attention_fwd(gctx, &d, o, lse, q, k, v));
            CHECK_OK(cml_attention_bwd(gctx, &d, dq, dk, dv, dout, q, k, v, o, lse));
            CHECK_OK(cml__attention_fwd_simt(gctx, &d, o, lse, q, k, v));
            CHECK_OK(cml__attention_bwd_simt(gctx, &d, dq, dk, dv, dout, q, k, v, o, lse));
            CHECK_OK(cml_ctx_synchronize(gctx));
        }
        dev_free(q, bq), dev_free(o, bq), dev_free(dout, bq), dev_free(dq, bq);
        dev_free(k, bkv), dev_free(v, bkv), dev_free(dk, bkv), dev_free(dv, bkv);
        dev_free(lse, bl), dev_free(cuq, bcu), dev_free(cukv, bcu);
    }
}

/* Head dims beyond 256 are refused on CUDA with a message; the mma entry refuses f32. */
static void test_unsupported(void) {
    cml_attention_desc d = cml_attention_desc_bshd(1, 4, 4, 1, 1, 300, false, CML_BF16);
    void *buf = dev_alloc(4 * 300 * 2 * 2);
    float *lse = dev_alloc(64);
    CHECK_STATUS(cml_attention_fwd(gctx, &d, buf, lse, buf, buf, buf), CML_ERR_UNSUPPORTED, "desc->D=300");
    CHECK_STATUS(cml_attention_bwd(gctx, &d, buf, buf, buf, buf, buf, buf, buf, buf, lse), CML_ERR_UNSUPPORTED,
                 "head dims up to 256");
    cml_attention_desc f = cml_attention_desc_bshd(1, 4, 4, 1, 1, 64, false, CML_F32);
    CHECK_STATUS(cml__attention_fwd_mma(gctx, &f, buf, lse, buf, buf, buf), CML_ERR_UNSUPPORTED, "f16/bf16");
    dev_free(buf, 4 * 300 * 2 * 2);
    dev_free(lse, 64);
}

/* ---- timings (informational) ------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Median-free simple timing: warm-up, then `reps` calls between two synchronizations. */
static double time_calls(int path, bool bwd, const problem *pr, const dev_bufs *g, int reps) {
    for (int r = 0; r < 2; r++) CHECK_OK(bwd ? run_bwd(path, pr, g) : run_fwd(path, pr, g));
    CHECK_OK(cml_ctx_synchronize(gctx));
    double t0 = now_s();
    for (int r = 0; r < reps; r++) CHECK_OK(bwd ? run_bwd(path, pr, g) : run_fwd(path, pr, g));
    CHECK_OK(cml_ctx_synchronize(gctx));
    return (now_s() - t0) / reps;
}

static void test_timing(void) {
    if (under_sanitizer()) return;
    const int64_t B = 4, H = 16, S = 1024;
    for (int di = 0; di < 3; di++) {
        const cml_dtype dt = di == 1 ? CML_F32 : CML_BF16;
        const int64_t D = di == 2 ? 256 : 64;
        for (int causal = 0; causal < 2; causal++) {
            problem pr;
            memset(&pr, 0, sizeof pr);
            pr.d = cml_attention_desc_bshd(B, S, S, H, H, D, causal, dt);
            const size_t n = (size_t)(B * S * H * D) * cml_dtype_size(dt), nl = sizeof(float) * (size_t)(B * H * S);
            dev_bufs g = {dev_alloc(n), dev_alloc(n), dev_alloc(n), dev_alloc(n), dev_alloc(n),
                          dev_alloc(n), dev_alloc(n), dev_alloc(n), dev_alloc(nl)};
            void *h = malloc(n);
            random_fill(h, dt, B * S * H * D, -1.0f, 1.0f);
            void *bufs[5] = {g.q, g.k, g.v, g.o, g.dout};
            for (int i = 0; i < 5; i++) upload(bufs[i], h, n);
            double flops = 4.0 * (double)(B * H) * (double)S * (double)S * (double)D * (causal ? 0.5 : 1.0);
            for (int path = dt == CML_F32 ? PATH_SIMT : PATH_AUTO; path <= PATH_SIMT; path++) {
                double tf = time_calls(path, false, &pr, &g, 20), tb = time_calls(path, true, &pr, &g, 10);
                const char *pname =
                    path == PATH_SIMT ? "simt" : cml__attention_fwd_cuda_path_name(gctx, &pr.d, g.o, g.q, g.k, g.v);
                const char *bname = path == PATH_SIMT ? "simt"
                                                      : cml__attention_bwd_cuda_path_name(gctx, &pr.d, g.dq, g.dk, g.dv,
                                                                                          g.dout, g.q, g.k, g.v, g.o);
                printf("  timing %-4s/%-4s %s B=%lld H=%lld S=%lld D=%lld %s: fwd %.3f ms %.1f TFLOP/s, bwd %.3f ms "
                       "%.1f TFLOP/s\n",
                       pname, bname, cml_dtype_name(dt), (long long)B, (long long)H,
                       (long long)S, (long long)D, causal ? "causal" : "full", tf * 1e3, flops / tf * 1e-12,
                       tb * 1e3, 2.5 * flops / tb * 1e-12);
            }
            dev_free(g.q, n), dev_free(g.k, n), dev_free(g.v, n), dev_free(g.o, n), dev_free(g.dout, n);
            dev_free(g.dq, n), dev_free(g.dk, n), dev_free(g.dv, n), dev_free(g.lse, nl);
            free(h);
        }
    }
}

/* Which paths the cases above took (run last; left out with CML_TEST_ONLY, which skips the sweeps). */
static void test_paths_taken(void) {
    const int arch = cml__cuda_arch(0);
    printf("sm90 forward path: %d of %d forward cases through cml_attention_fwd predicted sm90, %d ran there "
           "(device sm_%d)\n", n_fwd_sm90, n_fwd_auto, n_fwd_sm90_runs, arch);
    CHECK_MSG(arch != 90 || n_fwd_sm90 > 0, "an sm_90 device, but no forward case took the sm90 path");
    CHECK_MSG(n_fwd_sm90_runs == n_fwd_sm90, "%d cases predicted sm90, %d ran there", n_fwd_sm90, n_fwd_sm90_runs);
    /* the rule takes causal D = 64 with S_q = 256 / 640 (SM90_SHAPES) unless CML_ATT_FWD_QSHIFT=0 turns it off */
    const cml_attention_desc q1k = cml_attention_desc_bshd(1, 1024, 1024, 1, 1, 64, true, CML_BF16);
    const bool qs_on = cml__attention_fwd_sm90_q_shift(&q1k) > 0;
    printf("sm90 forward QSHIFT (D = 64 query tiles ending at S_q): %d cases predicted, %d ran there (rule %s)\n",
           n_fwd_qshift, n_fwd_qshift_runs, qs_on ? "on" : "off");
    CHECK_MSG(n_fwd_qshift_runs == n_fwd_qshift, "%d cases predicted QSHIFT, %d ran it", n_fwd_qshift,
              n_fwd_qshift_runs);
    CHECK_MSG(arch != 90 || !qs_on || n_fwd_qshift > 0, "an sm_90 device, but no forward case took the QSHIFT kernel");
    /* the rule takes causal D = 256 with S_kv <= 512 (SM90_SHAPES) unless CML_ATT_FWD_D256PRO=0 turns it off */
    const cml_attention_desc p512 = cml_attention_desc_bshd(1, 512, 512, 1, 1, 256, true, CML_BF16);
    const bool pro_on = cml__attention_fwd_sm90_d256pro(&p512);
    printf("sm90 forward D = 256 PRO (per-consumer Q halves): %d cases predicted, %d ran there (rule %s)\n", n_fwd_pro,
           n_fwd_pro_runs, pro_on ? "on" : "off");
    CHECK_MSG(n_fwd_pro_runs == n_fwd_pro, "%d cases predicted D = 256 PRO, %d ran it", n_fwd_pro, n_fwd_pro_runs);
    CHECK_MSG(arch != 90 || !pro_on || n_fwd_pro > 0, "an sm_90 device, but no forward case took the D = 256 PRO kernel");
    printf("mma backward path: %d of %d 16-bit backward cases through cml_attention_bwd ran there, D > 128: %d of %d "
           "(device sm_%d); sm90 backward: %d (D > 128: %d)\n", n_bwd_mma, n_bwd_auto, n_bwd_wide_mma, n_bwd_wide, arch,
           n_bwd_sm90, n_bwd_wide_sm90);
    CHECK_MSG(arch < 80 || n_bwd_mma > 0, "an sm_%d device, but no backward case took the mma path", arch);
    /* sm_80 and sm_90 have the shared memory the D = 256 kernels take (sm_86/89 do not): each D > 128
     * case runs on a tensor-core path, on sm_90 the wgmma one where its TMA rules allow */
    CHECK_MSG(!(arch == 80 || arch == 90) || (n_bwd_wide > 0 && n_bwd_wide_mma + n_bwd_wide_sm90 == n_bwd_wide),
              "an sm_%d device, but %d + %d of %d backward cases with D > 128 took the mma / sm90 paths", arch,
              n_bwd_wide_mma, n_bwd_wide_sm90, n_bwd_wide);
    /* under the sanitizer the sweep keeps only cases whose D > 128 backward goes to the mma kernel
     * (measured, session 10); test_gpu_attention_bwd90 runs the sm90 D = 256 kernel there */
    CHECK_MSG(arch != 90 || under_sanitizer() || n_bwd_wide_sm90 > 0,
              "an sm_90 device, but no backward case with D > 128 took the sm90 path");
}

int main(void) {
    int rc = gpu_test_init(20260511);
    if (rc) return rc;
    RUN(test_sweep);
    RUN(test_layouts);
    RUN(test_sm90_fwd);
    RUN(test_varlen);
    RUN(test_varlen_bad_offsets);
    RUN(test_unsupported);
    RUN(test_timing);
    RUN(test_paths_taken); /* its checks now count as a test: before, a failed one did not change the exit code */
    return th_finish();
}
#endif
