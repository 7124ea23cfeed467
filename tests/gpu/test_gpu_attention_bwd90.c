/* GPU tests of cml_attention_bwd on the Hopper path (attention_bwd_sm90.cu, issue 6) against
 * a float64 reference written here, on fresh random inputs: head dims 64, 128 and 256 (its own
 * kernel in 2-CTA clusters, attention_bwd_sm90_d256p.cuh: odd and even key-block counts), causal
 * and not, S_q == S_kv and S_q != S_kv both ways (causal rows that see no key), lengths 1, 7, 77,
 * 127, 1000, 1025, 4097, GQA and MQA, negative scales, the layouts TMA takes ([B,S,H,D], [B,H,S,D], and
 * [B,S,H,D] padded with 16-byte multiples), bf16 and f16. The backward is fed the reference
 * forward's O (rounded to the dtype) and lse, so its error is its own. dQ, dK, dV are poisoned
 * (0xFF bytes: NaN) before every run; every element must be written, the padding between
 * elements must keep the poison, two runs must be bitwise identical, and the norm-wise relative
 * error ||got - ref|| / ||ref|| must be <= 1e-2. Each case states the path it predicts
 * (cml__attention_bwd_cuda_path_name) and the sm90 launch counter must agree; on an sm_90
 * device every case here must take the sm90 path, elsewhere none does (the cases still run,
 * on the mma path, and the sm90 checks are reported as skipped). Then problems the sm90 path
 * must decline (f32, odd strides, unaligned pointers, D = 80), a causal D = 128 problem with 128 key
 * blocks that claims them longest first (CML_ATT_BWD_ASC=1: every causal D = 64 / 128 case does), and
 * determinism loops: 1000
 * forward + backward runs of a causal GQA problem at D = 128 and at D = 256 (3 under
 * CML_TEST_SANITIZER), every output bitwise equal to the first run's. CML_TEST_ONLY_D=256 (e.g.
 * for a sanitizer run) keeps the cases of that head dim only. Exits 77 ("skipped") without a GPU. */
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

static bool hopper;                /* an sm_90 device: the sm90 path must run */
static int only_d;                 /* CML_TEST_ONLY_D: run the cases of this head dim only (0: all) */
static int n_cases, n_cases_sm90; /* cases run, and those that ran on sm90 (twice each, as predicted) */

/* ---- the float64 reference (contiguous (B, H, S, D) doubles) ---------------------------------- */

typedef struct problem {
    cml_attention_desc d;
    place pq, pk, pv, po;
    void *q, *k, *v, *dout, *o_in; /* host, dtype, placed */
    float *lse_in;                 /* (B, H_q, S_q) */
    double *Q, *K, *V, *dO, *O;    /* the same values as doubles, (B, H, S, D) */
    double *dq, *dk, *dv;          /* reference gradients, (B, H, S, D) */
} problem;

static double dot(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t c = 0; c < n; c++) s += a[c] * b[c];
    return s;
}

/* Unpacks a placed dtype buffer into (B, H, S, D) doubles. */
static double *unpack(const void *src, const place *p, cml_dtype dt, int64_t B, int64_t S, int64_t H, int64_t D) {
    double *out = malloc(sizeof(double) * (size_t)(B * H * S * D));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t c = 0; c < D; c++)
                    out[((b * H + h) * S + s) * D + c] = cml_dtype_load(src, dt, at(p, b, s, h) + c);
    return out;
}

/* O (rounded to the dtype, placed like O) and lse (f32) from Q, K, V. */
static void reference_fwd(problem *pr) {
    const cml_attention_desc *d = &pr->d;
    const int64_t D = d->D, group = d->H_q / d->H_kv, Sq = d->S_q, Sk = d->S_kv;
    double *s = malloc(sizeof(double) * (size_t)Sk), *o = malloc(sizeof(double) * (size_t)D);
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->H_q; h++) {
            const double *K = pr->K + (b * d->H_kv + h / group) * Sk * D, *V = pr->V + (b * d->H_kv + h / group) * Sk * D;
            for (int64_t i = 0; i < Sq; i++) {
                const double *q = pr->Q + ((b * d->H_q + h) * Sq + i) * D;
                const int64_t vis = visible(d, i);
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < vis; j++) {
                    s[j] = d->scale * dot(q, K + j * D, D);
                    if (s[j] > m) m = s[j];
                }
                for (int64_t c = 0; c < D; c++) o[c] = 0;
                for (int64_t j = 0; j < vis; j++) {
                    const double p = exp(s[j] - m);
                    l += p;
                    for (int64_t c = 0; c < D; c++) o[c] += p * V[j * D + c];
                }
                for (int64_t c = 0; c < D; c++)
                    cml_dtype_store(pr->o_in, d->dtype, at(&pr->po, b, i, h) + c, vis ? (float)(o[c] / l) : 0.0f);
                pr->lse_in[(b * d->H_q + h) * Sq + i] = vis ? (float)(m + log(l)) : -INFINITY;
            }
        }
    free(s);
    free(o);
}

/* dQ, dK, dV from the backward's actual inputs (O rounded, lse as f32). */
static void reference_bwd(problem *pr) {
    const cml_attention_desc *d = &pr->d;
    const int64_t D = d->D, group = d->H_q / d->H_kv, Sq = d->S_q, Sk = d->S_kv;
    const size_t nq = (size_t)(d->B * d->H_q * Sq * D), nk = (size_t)(d->B * d->H_kv * Sk * D);
    pr->O = unpack(pr->o_in, &pr->po, d->dtype, d->B, Sq, d->H_q, D);
    pr->dq = calloc(nq, sizeof(double)), pr->dk = calloc(nk, sizeof(double)), pr->dv = calloc(nk, sizeof(double));
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->H_q; h++) {
            const int64_t kv = (b * d->H_kv + h / group) * Sk * D;
            for (int64_t i = 0; i < Sq; i++) {
                const int64_t qo = ((b * d->H_q + h) * Sq + i) * D;
                const double *q = pr->Q + qo, *dout = pr->dO + qo, L = pr->lse_in[(b * d->H_q + h) * Sq + i];
                const double Di = dot(dout, pr->O + qo, D);
                double *dq = pr->dq + qo;
                const int64_t vis = visible(d, i);
                for (int64_t j = 0; j < vis; j++) {
                    const double *k = pr->K + kv + j * D, *v = pr->V + kv + j * D;
                    const double p = exp(d->scale * dot(q, k, D) - L), ds = p * (dot(dout, v, D) - Di);
                    double *dk = pr->dk + kv + j * D, *dv = pr->dv + kv + j * D;
                    for (int64_t c = 0; c < D; c++) {
                        dq[c] += d->scale * ds * k[c];
                        dk[c] += d->scale * ds * q[c];
                        dv[c] += p * dout[c];
                    }
                }
            }
        }
}

/* ---- comparisons ------------------------------------------------------------------------------ */

/* got (placed, dtype) vs want ((B, H, S, D) doubles), norm-wise; every element must be finite. */
static void compare_placed(const char *what, const void *got, const place *p, cml_dtype dt, const double *want,
                           int64_t B, int64_t S, int64_t H, int64_t D) {
    double num = 0, den = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t c = 0; c < D; c++) {
                    const double g = cml_dtype_load(got, dt, at(p, b, s, h) + c), w = want[((b * H + h) * S + s) * D + c];
                    if (!isfinite(g)) {
                        CHECK_MSG(false, "%s: element (b %lld, s %lld, h %lld, d %lld) is %g (want %g)", what,
                                  (long long)b, (long long)s, (long long)h, (long long)c, g, w);
                        return;
                    }
                    num += (g - w) * (g - w);
                    den += w * w;
                }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    CHECK_MSG(rel <= 1e-2, "%s: relative error %.3g > 1e-2", what, rel);
}

/* ---- one problem ------------------------------------------------------------------------------ */

typedef struct shape {
    int64_t B, Hq, Hkv, Sq, Skv, D;
} shape;

static bool neg_scale; /* run_case's problems get a negative scale (legal: the backward takes any lse) */

static void problem_init(problem *pr, const shape *sh, bool causal, cml_dtype dt, int layout) {
    memset(pr, 0, sizeof *pr);
    pr->d = cml_attention_desc_bshd(sh->B, sh->Sq, sh->Skv, sh->Hq, sh->Hkv, sh->D, causal, dt);
    pr->d.scale *= neg_scale ? -1.5f : 1.5f; /* not the default, and sharper distributions */
    pr->pq = pr->po = make_place(layout, sh->B, sh->Sq, sh->Hq, sh->D);
    pr->pk = pr->pv = make_place(layout, sh->B, sh->Skv, sh->Hkv, sh->D);
    memcpy(pr->d.q_stride, pr->pq.st, sizeof pr->pq.st);
    memcpy(pr->d.o_stride, pr->po.st, sizeof pr->po.st);
    memcpy(pr->d.k_stride, pr->pk.st, sizeof pr->pk.st);
    memcpy(pr->d.v_stride, pr->pv.st, sizeof pr->pv.st);
    const size_t es = cml_dtype_size(dt);
    pr->q = malloc((size_t)pr->pq.n * es), pr->k = malloc((size_t)pr->pk.n * es);
    pr->v = malloc((size_t)pr->pv.n * es), pr->dout = malloc((size_t)pr->po.n * es);
    pr->o_in = calloc((size_t)pr->po.n, es);
    pr->lse_in = malloc(sizeof(float) * (size_t)(sh->B * sh->Hq * sh->Sq));
    random_fill(pr->q, dt, pr->pq.n, -2.0f, 2.0f);
    random_fill(pr->k, dt, pr->pk.n, -2.0f, 2.0f);
    random_fill(pr->v, dt, pr->pv.n, -1.0f, 1.0f);
    random_fill(pr->dout, dt, pr->po.n, -1.0f, 1.0f);
    pr->Q = unpack(pr->q, &pr->pq, dt, sh->B, sh->Sq, sh->Hq, sh->D);
    pr->K = unpack(pr->k, &pr->pk, dt, sh->B, sh->Skv, sh->Hkv, sh->D);
    pr->V = unpack(pr->v, &pr->pv, dt, sh->B, sh->Skv, sh->Hkv, sh->D);
    pr->dO = unpack(pr->dout, &pr->po, dt, sh->B, sh->Sq, sh->Hq, sh->D);
}

static void problem_free(problem *pr) {
    free(pr->q), free(pr->k), free(pr->v), free(pr->dout), free(pr->o_in), free(pr->lse_in);
    free(pr->Q), free(pr->K), free(pr->V), free(pr->dO), free(pr->O);
    free(pr->dq), free(pr->dk), free(pr->dv);
}

static void run_case(const shape *sh, bool causal, cml_dtype dt, int layout) {
    problem pr;
    problem_init(&pr, sh, causal, dt, layout);
    reference_fwd(&pr);
    reference_bwd(&pr);
    const cml_attention_desc *d = &pr.d;
    const size_t es = cml_dtype_size(dt);
    const size_t nq = (size_t)pr.pq.n * es, nk = (size_t)pr.pk.n * es, nv = (size_t)pr.pv.n * es,
                 no = (size_t)pr.po.n * es, nl = sizeof(float) * (size_t)(sh->B * sh->Hq * sh->Sq);
    char what[200];
    snprintf(what, sizeof what, "%s %s B=%lld Hq=%lld Hkv=%lld Sq=%lld Skv=%lld D=%lld %s%s", LAYOUT_NAME[layout],
             cml_dtype_name(dt), (long long)sh->B, (long long)sh->Hq, (long long)sh->Hkv, (long long)sh->Sq,
             (long long)sh->Skv, (long long)sh->D, causal ? "causal" : "full", neg_scale ? " scale<0" : "");
    void *q = dev_alloc(nq), *k = dev_alloc(nk), *v = dev_alloc(nv), *o = dev_alloc(no), *dout = dev_alloc(no);
    void *dq = dev_alloc(nq), *dk = dev_alloc(nk), *dv = dev_alloc(nv);
    float *lse = dev_alloc(nl);
    CHECK(q && k && v && o && dout && dq && dk && dv && lse);
    if (q && k && v && o && dout && dq && dk && dv && lse) {
        upload(q, pr.q, nq), upload(k, pr.k, nk), upload(v, pr.v, nv);
        upload(o, pr.o_in, no), upload(dout, pr.dout, no), upload(lse, pr.lse_in, nl);
        const char *path = cml__attention_bwd_cuda_path_name(gctx, d, dq, dk, dv, dout, q, k, v, o);
        const bool sm90 = strcmp(path, "sm90") == 0;
        CHECK_MSG(sm90 == hopper, "%s: predicted path %s on an sm_%d device", what, path, cml__cuda_arch(0));
        const long long runs0 = cml__attention_bwd_sm90_runs();
        void *outs[3] = {dq, dk, dv};
        const size_t nout[3] = {nq, nk, nv};
        const place *pl[3] = {&pr.pq, &pr.pk, &pr.pv};
        const double *want[3] = {pr.dq, pr.dk, pr.dv};
        const int64_t S[3] = {sh->Sq, sh->Skv, sh->Skv}, H[3] = {sh->Hq, sh->Hkv, sh->Hkv};
        unsigned char *first[3], *again[3];
        for (int r = 0; r < 2; r++) {
            for (int t = 0; t < 3; t++) poison(outs[t], nout[t]);
            CHECK_OK(cml_attention_bwd(gctx, d, dq, dk, dv, dout, q, k, v, o, lse));
            for (int t = 0; t < 3; t++) {
                unsigned char *h = malloc(nout[t]);
                download(h, outs[t], nout[t]);
                if (r == 0) first[t] = h;
                else again[t] = h;
            }
        }
        const long long runs = cml__attention_bwd_sm90_runs() - runs0;
        CHECK_MSG(runs == (sm90 ? 2 : 0), "%s: predicted path %s, but %lld sm90 launches for 2 runs", what, path, runs);
        n_cases++;
        n_cases_sm90 += sm90 && runs == 2;
        static const char *const name[3] = {"dQ", "dK", "dV"};
        for (int t = 0; t < 3; t++) {
            char w2[260];
            snprintf(w2, sizeof w2, "%s (%s) %s", what, path, name[t]);
            CHECK_MSG(memcmp(first[t], again[t], nout[t]) == 0, "%s: a repeat run differs", w2);
            compare_placed(w2, first[t], pl[t], dt, want[t], sh->B, S[t], H[t], sh->D);
            check_gaps(w2, first[t], pl[t], es, sh->B, S[t], H[t], sh->D);
            free(first[t]);
            free(again[t]);
        }
    }
    dev_free(q, nq), dev_free(k, nk), dev_free(v, nv), dev_free(o, no), dev_free(dout, no);
    dev_free(dq, nq), dev_free(dk, nk), dev_free(dv, nv), dev_free(lse, nl);
    problem_free(&pr);
}

/* ---- the sweep -------------------------------------------------------------------------------- */

static const shape SHAPES[] = {
    {2, 2, 2, 1, 1, 64},       /* one query, one key */
    {1, 4, 2, 7, 7, 128},      /* GQA 2, one partial tile */
    {2, 4, 1, 77, 77, 64},     /* MQA */
    {1, 2, 2, 127, 1000, 128}, /* S_q < S_kv */
    {1, 4, 2, 1000, 127, 64},  /* S_q > S_kv: causal rows that see no key */
    {2, 8, 4, 300, 300, 128},  /* GQA, several key blocks per head */
    {1, 2, 1, 1025, 1025, 128},
    {2, 16, 8, 1025, 1025, 64}, /* more work tiles (144) than SMs: CTAs take several */
    {1, 1, 1, 1000, 1025, 64},
    {1, 1, 1, 4097, 4097, 64},  /* causal only (the reference's cost) */
    /* D = 256 (BM = BN = 64: its own tiling) */
    {2, 2, 2, 1, 1, 256},       /* one query, one key */
    {1, 4, 2, 77, 77, 256},     /* GQA 2, partial tiles */
    {1, 2, 1, 127, 1000, 256},  /* MQA, S_q < S_kv */
    {1, 4, 2, 1000, 127, 256},  /* S_q > S_kv: causal rows that see no key */
    {2, 4, 4, 300, 300, 256},   /* several key blocks per head */
    {1, 2, 2, 1025, 1025, 256}, /* a key block and a query tile of one */
    {2, 16, 8, 513, 513, 256},  /* 144 work tiles: CTAs take several */
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0] };

/* Under the sanitizer only the shapes up to 300 long, bf16, one of causal / full each. */
static void test_sweep(void) {
    const bool san = under_sanitizer();
    int k = 0;
    for (int s = 0; s < N_SHAPES; s++)
        for (int causal = 0; causal < 2; causal++) {
            const shape *sh = &SHAPES[s];
            if (sh->Sq == 4097 && !causal) continue;
            if (only_d && sh->D != only_d) continue;
            if (san && (sh->Sq > 300 || sh->Skv > 300 || causal != s % 2)) continue;
            const cml_dtype dt = san || (k % 2 == 0) ? CML_BF16 : CML_F16;
            const int layout = k % N_TMA_LAYOUTS;
            k++;
            const int before = th_failed_checks;
            run_case(sh, causal, dt, layout);
            if (th_failed_checks != before)
                printf("  (shape %d, %s, %s, causal %d failed)\n", s, cml_dtype_name(dt), LAYOUT_NAME[layout], causal);
        }
    /* negative scales (D = 256: an odd number of key blocks, the last pair's second past S_kv) */
    static const shape NEG[] = {{1, 2, 1, 300, 513, 256}, {1, 4, 2, 129, 129, 64}};
    neg_scale = true;
    for (int s = 0; s < 2; s++)
        for (int causal = 0; causal < 2; causal++) {
            if (san && causal != s % 2) continue;
            if (only_d && NEG[s].D != only_d) continue;
            const int layout = (s + causal) % N_TMA_LAYOUTS, before = th_failed_checks;
            run_case(&NEG[s], causal, CML_BF16, layout);
            if (th_failed_checks != before) printf("  (negative-scale shape %d, causal %d failed)\n", s, causal);
        }
    neg_scale = false;
    /* D = 128 on the shapes above that ran at 64 and vice versa, in the other layouts */
    static const shape SWAP[] = {{2, 4, 1, 77, 77, 128}, {1, 4, 2, 1000, 127, 128}, {1, 2, 2, 127, 1000, 64},
                                 {2, 8, 4, 300, 300, 64}};
    for (int s = 0; s < 4; s++)
        for (int causal = 0; causal < 2; causal++) {
            if (san && (SWAP[s].Sq > 300 || SWAP[s].Skv > 300 || causal != s % 2)) continue;
            if (only_d && SWAP[s].D != only_d) continue;
            const cml_dtype dt = san || causal ? CML_BF16 : CML_F16;
            const int layout = (s + causal + 1) % N_TMA_LAYOUTS, before = th_failed_checks;
            run_case(&SWAP[s], causal, dt, layout);
            if (th_failed_checks != before)
                printf("  (swap shape %d, %s, %s, causal %d failed)\n", s, cml_dtype_name(dt), LAYOUT_NAME[layout],
                       causal);
        }
}

/* A causal D = 128 problem with 128 key blocks: the rule claims each head's key blocks longest
 * first (cooperative launch; CML_ATT_BWD_ASC=0 turns it off, =1 makes every causal D = 64 / 128
 * case above take it). Same checks as the sweep, and the ascending launches must be counted. */
static void test_ascending(void) {
    if (only_d && only_d != 128) return;
    if (under_sanitizer()) return; /* 300 x 16384 float64 reference: too slow under the sanitizer */
    const shape sh = {1, 2, 1, 300, 16384, 128};
    const char *e = getenv("CML_ATT_BWD_ASC");
    const long long asc0 = cml__attention_bwd_sm90_asc_runs();
    run_case(&sh, true, CML_BF16, 0);
    const long long asc = cml__attention_bwd_sm90_asc_runs() - asc0;
    if (hopper && !(e && strcmp(e, "0") == 0))
        CHECK_MSG(asc == 2, "causal D = 128 S_kv = 16384: %lld ascending launches for 2 runs, want 2", asc);
    else
        CHECK_MSG(asc == 0, "%lld ascending launches, want 0 (no sm_90 device, or CML_ATT_BWD_ASC=0)", asc);
}

/* Problems the sm90 backward must decline (they stay on the mma / SIMT paths). */
static void test_declines(void) {
    char *buf = dev_alloc(1 << 20);
    CHECK(buf);
    if (!buf) return;
    cml_attention_desc d = cml_attention_desc_bshd(1, 64, 64, 2, 2, 256, true, CML_BF16);
    CHECK(cml__attention_bwd_sm90_takes(gctx, &d, buf, buf, buf, buf, buf, buf, buf, buf) == hopper); /* D = 256 */
    d.q_stride[2] = 256 + 4; /* Q's heads 260 elements apart: not 16-byte multiples */
    CHECK(!cml__attention_bwd_sm90_takes(gctx, &d, buf, buf, buf, buf, buf, buf, buf, buf));
    d = cml_attention_desc_bshd(1, 64, 64, 2, 2, 256, false, CML_F32);
    CHECK(!cml__attention_bwd_sm90_takes(gctx, &d, buf, buf, buf, buf, buf, buf, buf, buf)); /* f32 at D = 256 */
    d = cml_attention_desc_bshd(1, 64, 64, 2, 2, 64, true, CML_F32);
    CHECK(!cml__attention_bwd_sm90_takes(gctx, &d, buf, buf, buf, buf, buf, buf, buf, buf)); /* f32 */
    d = cml_attention_desc_bshd(1, 64, 64, 2, 2, 64, true, CML_BF16);
    CHECK(cml__attention_bwd_sm90_takes(gctx, &d, buf, buf, buf, buf, buf, buf, buf, buf) == hopper);
    CHECK(!cml__attention_bwd_sm90_takes(gctx, &d, buf + 2, buf, buf, buf, buf, buf, buf, buf)); /* dQ unaligned */
    CHECK(!cml__attention_bwd_sm90_takes(gctx, &d, buf, buf, buf, buf + 8, buf, buf, buf, buf)); /* dO unaligned */
    d.k_stride[1] = 2 * 64 + 4; /* K's positions 132 elements apart: not 16-byte multiples */
    CHECK(!cml__attention_bwd_sm90_takes(gctx, &d, buf, buf, buf, buf, buf, buf, buf, buf));
    d = cml_attention_desc_bshd(1, 64, 64, 2, 2, 80, false, CML_BF16);
    CHECK(!cml__attention_bwd_sm90_takes(gctx, &d, buf, buf, buf, buf, buf, buf, buf, buf)); /* D = 80 */
    dev_free(buf, 1 << 20);
}

/* Forward + backward many times on the same inputs: every output bitwise equal to the first run's
 * (the dQ accumulation order across CTAs, through the semaphores, must not vary). */
static void determinism(const shape sh, int reps) {
    if (only_d && sh.D != only_d) return;
    if (under_sanitizer()) reps = 3;
    problem pr;
    problem_init(&pr, &sh, true, CML_BF16, LAYOUT_BSHD);
    const cml_attention_desc *d = &pr.d;
    const size_t nq = (size_t)pr.pq.n * 2, nk = (size_t)pr.pk.n * 2, nl = sizeof(float) * (size_t)(sh.B * sh.Hq * sh.Sq);
    void *q = dev_alloc(nq), *k = dev_alloc(nk), *v = dev_alloc(nk), *o = dev_alloc(nq), *dout = dev_alloc(nq);
    void *dq = dev_alloc(nq), *dk = dev_alloc(nk), *dv = dev_alloc(nk);
    float *lse = dev_alloc(nl);
    unsigned char *ref[5], *got = malloc(nq);
    void *outs[5] = {o, lse, dq, dk, dv};
    const size_t n[5] = {nq, nl, nq, nk, nk};
    CHECK(q && k && v && o && dout && dq && dk && dv && lse && got);
    if (q && k && v && o && dout && dq && dk && dv && lse && got) {
        upload(q, pr.q, nq), upload(k, pr.k, nk), upload(v, pr.v, nk), upload(dout, pr.dout, nq);
        const long long runs0 = cml__attention_bwd_sm90_runs();
        int differ = 0, first_bad = -1;
        for (int r = 0; r < reps; r++) {
            for (int t = 0; t < 5; t++) poison(outs[t], n[t]);
            CHECK_OK(cml_attention_fwd(gctx, d, o, lse, q, k, v));
            CHECK_OK(cml_attention_bwd(gctx, d, dq, dk, dv, dout, q, k, v, o, lse));
            for (int t = 0; t < 5; t++) {
                if (r == 0) {
                    ref[t] = malloc(n[t]);
                    download(ref[t], outs[t], n[t]);
                    continue;
                }
                download(got, outs[t], n[t]);
                if (memcmp(got, ref[t], n[t]) != 0) {
                    differ++;
                    if (first_bad < 0) first_bad = r;
                }
            }
        }
        const long long runs = cml__attention_bwd_sm90_runs() - runs0;
        printf("  determinism: %d forward + backward runs (B=%lld Hq=%lld Hkv=%lld S=%lld D=%lld causal bf16), %lld on "
               "the sm90 backward, %d outputs differed from the first run's\n", reps, (long long)sh.B, (long long)sh.Hq,
               (long long)sh.Hkv, (long long)sh.Sq, (long long)sh.D, runs, differ);
        CHECK_MSG(differ == 0, "determinism: %d outputs differ from the first run's (first at run %d)", differ, first_bad);
        CHECK_MSG(runs == (hopper ? reps : 0), "determinism: %lld sm90 backward launches for %d runs", runs, reps);
        for (int t = 0; t < 5; t++) free(ref[t]);
    }
    free(got);
    dev_free(q, nq), dev_free(k, nk), dev_free(v, nk), dev_free(o, nq), dev_free(dout, nq);
    dev_free(dq, nq), dev_free(dk, nk), dev_free(dv, nk), dev_free(lse, nl);
    problem_free(&pr);
}

static void test_determinism(void) {
    determinism((shape){2, 8, 2, 777, 777, 128}, 1000);
    determinism((shape){2, 8, 2, 777, 777, 256}, 1000);
}

int main(void) {
    int rc = gpu_test_init(20261201);
    if (rc) return rc;
    hopper = cml__cuda_arch(0) == 90;
    only_d = getenv("CML_TEST_ONLY_D") ? atoi(getenv("CML_TEST_ONLY_D")) : 0;
    RUN(test_sweep);
    RUN(test_ascending);
    RUN(test_declines);
    RUN(test_determinism);
    if (hopper)
        printf("sm90 backward path: %d of %d cases ran there (twice each, as predicted; device sm_%d)\n", n_cases_sm90,
               n_cases, cml__cuda_arch(0));
    else
        printf("sm90 backward path: skipped, the device is sm_%d (the %d cases ran on the mma path)\n",
               cml__cuda_arch(0), n_cases);
    CHECK_MSG(!hopper || (n_cases > 0 && n_cases_sm90 == n_cases), "sm_90 device: %d of %d cases on the sm90 path",
              n_cases_sm90, n_cases);
    return th_finish();
}
#endif
