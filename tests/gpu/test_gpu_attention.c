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
 * an sm_90 device when none did. The backward's mma launch counter likewise: every 16-bit
 * backward through cml_attention_bwd must run on the path cml__attention_mma_takes predicts
 * (twice), and on sm_80 / sm_90 every one with D > 128 on mma. Then head dims the CUDA path
 * refuses, and timings (informational) at B=4, H=16, S=1024, D=64 and 256. Exits 77
 * ("skipped") without a GPU. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <time.h>

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
 * sm90 launches seen for them */
static int n_fwd_auto, n_fwd_sm90, n_fwd_sm90_runs;
/* 16-bit backward cases through the public entry point and those that ran on mma: all, D > 128 */
static int n_bwd_auto, n_bwd_mma, n_bwd_wide, n_bwd_wide_mma;


/* ---- placements: element (b, s, h, d) at b st[0] + s st[1] + h st[2] + d ------------------------- */

typedef struct place {
    int64_t st[3];
    int64_t n; /* elements the buffer holds */
} place;

enum { LAYOUT_BSHD, LAYOUT_BHSD, LAYOUT_BSHD_PAD8, LAYOUT_BHSD_ODD, N_LAYOUTS };
static const char *const LAYOUT_NAME[N_LAYOUTS] = {"bshd", "bhsd", "bshd+pad8", "bhsd+odd"};

static place make_place(int layout, int64_t B, int64_t S, int64_t H, int64_t D) {
    place p;
    switch (layout) {
    case LAYOUT_BSHD:
        p.st[2] = D, p.st[1] = H * D, p.st[0] = S * H * D;
        break;
    case LAYOUT_BHSD:
        p.st[1] = D, p.st[2] = S * D, p.st[0] = H * S * D;
        break;
    case LAYOUT_BSHD_PAD8: /* rows D + 8 apart, more between positions and batches: multiples of 8 when D is */
        p.st[2] = D + 8, p.st[1] = H * (D + 8) + 8, p.st[0] = S * p.st[1] + 16;
        break;
    default: /* odd strides: no vector loads */
        p.st[1] = D + 3, p.st[2] = S * (D + 3) + 1, p.st[0] = H * p.st[2] + 5;
        break;
    }
    p.n = (B - 1) * p.st[0] + (S - 1) * p.st[1] + (H - 1) * p.st[2] + D;
    return p;
}

static inline int64_t at(const place *p, int64_t b, int64_t s, int64_t h) {
    return b * p->st[0] + s * p->st[1] + h * p->st[2];
}

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

static int64_t visible(const cml_attention_desc *d, int64_t i) {
    if (!d->causal) return d->S_kv;
    int64_t e = i + d->S_kv - d->S_q + 1;
    return e < 0 ? 0 : e > d->S_kv ? d->S_kv : e;
}

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

/* The bytes of a placed output buffer that are no element must still be 0xFF. */
static void check_gaps(const char *what, const unsigned char *buf, const place *p, size_t es, int64_t B, int64_t S,
                       int64_t H, int64_t D) {
    unsigned char *mine = calloc((size_t)p->n, 1);
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++) memset(mine + at(p, b, s, h), 1, (size_t)D);
    for (int64_t e = 0; e < p->n; e++) {
        if (mine[e]) continue;
        for (size_t k = 0; k < es; k++)
            if (buf[(size_t)e * es + k] != 0xFF) {
                CHECK_MSG(false, "%s: padding element %lld was written", what, (long long)e);
                free(mine);
                return;
            }
    }
    free(mine);
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
        const long long runs0 = cml__attention_fwd_sm90_runs();
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
        if (path == PATH_AUTO) {
            const bool sm90 = strcmp(fpath, "sm90") == 0;
            n_fwd_auto++;
            n_fwd_sm90 += sm90;
            n_fwd_sm90_runs += sm90 && sm90_runs == 2;
            CHECK_MSG(sm90_runs == (sm90 ? 2 : 0), "%s fwd: predicted path %s, but %lld sm90 launches for 2 runs", what,
                      fpath, sm90_runs);
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
        const bool bmma = path == PATH_AUTO && cml__attention_mma_takes(gctx, d, true);
        const long long mma0 = cml__attention_bwd_mma_runs();
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
        CHECK_MSG(mma_runs == (bmma ? 2 : 0), "%s bwd: predicted path %s, but %lld mma launches for 2 runs", what,
                  bmma ? "mma" : "simt", mma_runs);
        if (path == PATH_AUTO && dt != CML_F32) {
            n_bwd_auto++, n_bwd_wide += D > 128;
            n_bwd_mma += mma_runs == 2, n_bwd_wide_mma += D > 128 && mma_runs == 2;
        }
        static const char *const name[3] = {"dQ", "dK", "dV"};
        for (int t = 0; t < 3; t++) {
            snprintf(w2, sizeof w2, "%s bwd (%s) %s", what, bmma ? "mma" : path == PATH_SIMT ? "simt" : "auto",
                     name[t]);
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
    {1, 1, 1, 4097, 4097, 64}, /* causal only */
};
enum { N_SM90_SHAPES = sizeof SM90_SHAPES / sizeof SM90_SHAPES[0] };

static void test_sm90_fwd(void) {
    const bool san = under_sanitizer();
    static const int layouts[3] = {LAYOUT_BSHD, LAYOUT_BHSD, LAYOUT_BSHD_PAD8};
    int k = 0;
    for (int s = 0; s < N_SM90_SHAPES; s++)
        for (int di = 1; di < (san ? 2 : N_TEST_DTYPES); di++)
            for (int causal = 0; causal < 2; causal++) {
                const shape *sh = &SM90_SHAPES[s];
                if (san && (sh->Sq > 300 || sh->Skv > 300)) continue;
                if (s == N_SM90_SHAPES - 1 && !causal) continue;
                int before = th_failed_checks;
                run_problem_opt(sh, causal, TEST_DTYPES[di], layouts[k++ % 3], true);
                if (th_failed_checks != before)
                    printf("  (sm90 shape %d, %s, causal %d failed)\n", s, cml_dtype_name(TEST_DTYPES[di]), causal);
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
                const char *bname = path == PATH_AUTO && cml__attention_mma_takes(gctx, &pr.d, true) ? "mma" : "simt";
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

int main(void) {
    int rc = gpu_test_init(20260511);
    if (rc) return rc;
    RUN(test_sweep);
    RUN(test_layouts);
    RUN(test_sm90_fwd);
    RUN(test_unsupported);
    RUN(test_timing);
    const bool hopper = cml__cuda_arch(0) == 90;
    printf("sm90 forward path: %d of %d forward cases through cml_attention_fwd predicted sm90, %d ran there "
           "(device sm_%d)\n", n_fwd_sm90, n_fwd_auto, n_fwd_sm90_runs, cml__cuda_arch(0));
    CHECK_MSG(!hopper || n_fwd_sm90 > 0, "an sm_90 device, but no forward case took the sm90 path");
    CHECK_MSG(n_fwd_sm90_runs == n_fwd_sm90, "%d cases predicted sm90, %d ran there", n_fwd_sm90, n_fwd_sm90_runs);
    const int arch = cml__cuda_arch(0);
    printf("mma backward path: %d of %d 16-bit backward cases through cml_attention_bwd ran there, D > 128: %d of %d "
           "(device sm_%d)\n", n_bwd_mma, n_bwd_auto, n_bwd_wide_mma, n_bwd_wide, arch);
    CHECK_MSG(arch < 80 || n_bwd_mma > 0, "an sm_%d device, but no backward case took the mma path", arch);
    /* sm_80 and sm_90 have the shared memory the D = 256 kernels take (sm_86/89 do not) */
    CHECK_MSG(!(arch == 80 || arch == 90) || (n_bwd_wide > 0 && n_bwd_wide_mma == n_bwd_wide),
              "an sm_%d device, but %d of %d backward cases with D > 128 took the mma path", arch, n_bwd_wide_mma,
              n_bwd_wide);
    return th_finish();
}
#endif
