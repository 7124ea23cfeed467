/* Session 14 (helper h14c): every f32 configuration's main loop now (cml__f32_mainloop_phased,
 * serpentine FFMA order, double-buffered fragments, P staging phases) against the loop it ran
 * before (cml__gemm_f32_force_old_loop(1), as CML_F32_OLD_LOOP=1), IN TURNS against cublasSgemm in
 * one process on f32_check's shapes (the squares and the 15 GPT-2 shapes). Reuses f32_check.cu (its
 * runtime stubs, shapes and L2-flushed event timer) by inclusion; links gemm_f32.cu as an object
 * (run_s14c.sh builds it twice: the chosen phases, and -DF32_P_*=... alternatives, run with --label).
 *
 * Rows: each shape with the estimate's plan ("pick"); then the configurations this change touches
 * (L16, M, S, T16) forced, with the estimate's splits for that configuration, on the five K = 8192
 * weight gradients (TN) and on 2048^3 NN and qkv fwd NT, where the pick is another one. V6's loop
 * is the same kernel in both arms, so its pick rows are the noise gauge (new / old ~ 1.00).
 * --changed-only: only rows that run a changed configuration.
 *
 * First every row's D new vs old, bitwise (one call each); then rounds x rows x {new, old} in
 * rotating order, `reps` calls of ours each followed by one of cuBLAS (medians). The summary
 * prints LAST: per row the geometric mean over rounds of old / cuBLAS, new / cuBLAS and new / old,
 * geomeans, and the decision rule's verdict per configuration.
 *
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I src -I include -I dev/gemm_f32 \
 *        dev/gemm_f32/s14c.cu gemm_f32.o -lcublas -o s14c
 *   ./s14c [--reps 7] [--rounds 3] [--label new] [--changed-only] [--match x] */
#define main f32_check_main
#include "f32_check.cu"
#undef main

#include <math.h>

#define MAX_R 4
#define MAX_ROWS 64

static const char *const CHANGED[] = {"128x128x16/16x8", "64x128x8/8x8", "64x64x8/8x8", "32x64x16/4x8"};
static const char *const SHORT[] = {"L16", "M", "S", "T16"};
#define N_CHANGED 4

static const char *short_name(const char *cfg) {
    for (int i = 0; i < N_CHANGED; i++)
        if (!strcmp(cfg, CHANGED[i])) return SHORT[i];
    return !strcmp(cfg, "128x128x16/8x8") ? "V6" : cfg;
}

typedef struct row {
    const shape *x;
    const char *forced; /* configuration name, NULL: the pick */
    char cfg[24];       /* what runs */
    int splits;
    double ratio[MAX_R][2], speed[MAX_R][2]; /* [round][new, old] */
} row;

static cml_gemm_desc desc_of(const shape *x) {
    return cml_gemm_desc_init(x->a_t ? CML_OP_T : CML_OP_N, x->b_t ? CML_OP_T : CML_OP_N, x->M, x->N, x->K, x->batch,
                              CML_F32, CML_F32);
}

int main(int argc, char **argv) {
    int reps = 7, rounds = 3;
    bool changed_only = false;
    const char *match = "", *label = "new";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--label") && i + 1 < argc) label = argv[++i];
        else if (!strcmp(argv[i], "--match") && i + 1 < argc) match = argv[++i];
        else if (!strcmp(argv[i], "--changed-only")) changed_only = true;
    }
    if (reps < 1 || reps > 64) reps = 7;
    if (rounds < 1 || rounds > MAX_R) rounds = 3;
    ctx.device.type = CML_CUDA;
    ctx.device.index = 0;
    CK(cudaStreamCreate(&stream));
    ctx.stream = stream;
    cublasCreate(&blas);
    cublasSetStream(blas, stream);
    cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH);
    printf("s14c (%s): CML_F32_OLD_LOOP in the environment: %d\n", label, cml__gemm_f32_force_old_loop(-1));

    size_t max_a = 0, max_b = 0, max_d = 0;
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
        const shape *x = &SHAPES[s];
        if (!strcmp(x->set, "batched")) continue;
        const size_t bt = (size_t)x->batch;
        max_a = max_a > bt * x->M * x->K ? max_a : bt * x->M * x->K;
        max_b = max_b > bt * x->K * x->N ? max_b : bt * x->K * x->N;
        max_d = max_d > bt * x->M * x->N ? max_d : bt * x->M * x->N;
    }
    float *A, *B, *D;
    CK(cudaMalloc(&flush_buf, 256 << 20));
    CK(cudaMalloc(&A, max_a * 4));
    CK(cudaMalloc(&B, max_b * 4));
    CK(cudaMalloc(&D, max_d * 4));
    fill(A, max_a, 1), fill(B, max_b, 2);
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float *h0 = (float *)malloc(max_d * 4), *h1 = (float *)malloc(max_d * 4);

    static row rows[MAX_ROWS];
    int nrow = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
            const shape *x = &SHAPES[s];
            if (!strcmp(x->set, "batched") || !strstr(x->name, match)) continue;
            const cml_gemm_desc d = desc_of(x);
            cml__gemm_f32_force_config(NULL);
            const char *pick = cml__gemm_f32_config_name(&ctx, &d);
            for (int c = -1; c < N_CHANGED && nrow < MAX_ROWS; c++) {
                if ((pass == 0) != (c < 0)) continue;
                if (c >= 0) { /* forced: the dW shapes, 2048 NN, qkv fwd NT */
                    const bool dw = strstr(x->name, " dw") != NULL;
                    if (!dw && strcmp(x->name, "2048") && strcmp(x->name, "qkv fwd")) continue;
                    if (!strcmp(pick, CHANGED[c])) continue;
                }
                row *r = &rows[nrow];
                r->x = x;
                r->forced = c < 0 ? NULL : CHANGED[c];
                cml__gemm_f32_force_config(r->forced);
                snprintf(r->cfg, sizeof r->cfg, "%s", cml__gemm_f32_config_name(&ctx, &d));
                r->splits = cml__gemm_f32_splits(&ctx, &d);
                bool changed = false;
                for (int i = 0; i < N_CHANGED; i++) changed |= !strcmp(r->cfg, CHANGED[i]);
                if (changed_only && !changed) continue;
                nrow++;
            }
        }
    cml__gemm_f32_force_config(NULL);

    /* bitwise: D of the new loop equal to the old loop's */
    int differ = 0, compared = 0;
    for (int r = 0; r < nrow; r++) {
        const shape *x = rows[r].x;
        const cml_gemm_desc d = desc_of(x);
        cml__gemm_f32_force_config(rows[r].forced);
        const size_t nd = (size_t)x->batch * x->M * x->N;
        for (int old = 0; old < 2; old++) {
            cml__gemm_f32_force_old_loop(old);
            CK(cudaMemsetAsync(D, 0xFF, nd * 4, stream));
            if (cml__gemm_f32(&ctx, &d, D, A, B, NULL) != CML_OK) {
                printf("FAILED: %s\n", last_error);
                return 1;
            }
            CK(cudaMemcpyAsync(old ? h1 : h0, D, nd * 4, cudaMemcpyDeviceToHost, stream));
            CK(cudaStreamSynchronize(stream));
        }
        compared++;
        if (memcmp(h0, h1, nd * 4) != 0) {
            differ++;
            printf("  DIFFERS: %s %s (%s, %d splits): new vs old loop\n", x->name, rows[r].forced ? "forced" : "pick",
                   rows[r].cfg, rows[r].splits);
        }
    }
    printf("bitwise (%s): %d rows, D of the new loop vs the old loop, %d differ\n", label, compared, differ);

    printf("\ntiming: TFLOP/s, median of %d calls, L2 flushed, each call of ours followed by one of cuBLAS\n", reps);
    for (int rd = 0; rd < rounds; rd++)
        for (int r = 0; r < nrow; r++) {
            const shape *x = rows[r].x;
            const cml_gemm_desc d = desc_of(x);
            cml__gemm_f32_force_config(rows[r].forced);
            const double flop = 2.0 * x->M * (double)x->N * x->K * x->batch;
            for (int k = 0; k < 2; k++) {
                const int old = (k + rd + r) % 2; /* rotating order */
                cml__gemm_f32_force_old_loop(old);
                float t[2][64];
                for (int i = -2; i < reps; i++)
                    for (int side = 0; side < 2; side++) {
                        const float ms = time_once(side, &d, D, A, B, i);
                        if (i >= 0) t[side][i] = ms;
                    }
                qsort(t[0], reps, 4, cmpf), qsort(t[1], reps, 4, cmpf);
                const double ref = flop / t[1][reps / 2] * 1e-9, ours = flop / t[0][reps / 2] * 1e-9;
                rows[r].ratio[rd][old] = ours / ref;
                rows[r].speed[rd][old] = ours;
                printf("round %d %-10s %-6s %c%c %-3s: cuBLAS %6.2f ours %6.2f ratio %.4f (%s, %d splits)\n", rd,
                       x->name, rows[r].forced ? "forced" : "pick", x->a_t ? 'T' : 'N', x->b_t ? 'T' : 'N',
                       old ? "old" : "new", ref, ours, ours / ref, short_name(rows[r].cfg), rows[r].splits);
                fflush(stdout);
            }
        }
    cml__gemm_f32_force_config(NULL);
    cml__gemm_f32_force_old_loop(-1);

    printf("\n== summary (%s): ratio to cuBLAS sgemm (geomean of %d rounds in turns), %s / old speed\n", label, rounds,
           label);
    printf("%-10s %-6s %2s %-4s %6s %10s %10s %8s\n", "shape", "plan", "op", "cfg", "splits", "old/cuBLAS",
           "new/cuBLAS", "new/old");
    double gl[N_CHANGED + 2] = {0}, gmin[N_CHANGED + 2];
    int gn[N_CHANGED + 2] = {0};
    for (int i = 0; i < N_CHANGED + 2; i++) gmin[i] = 9;
    double pick_min = 9, sq[2] = {0, 0}, ot[2] = {0, 0};
    int nsq = 0, not_ = 0;
    for (int r = 0; r < nrow; r++) {
        const shape *x = rows[r].x;
        double lr[2] = {0, 0}, ls = 0;
        for (int rd = 0; rd < rounds; rd++) {
            for (int o = 0; o < 2; o++) lr[o] += log(rows[r].ratio[rd][o]);
            ls += log(rows[r].speed[rd][0] / rows[r].speed[rd][1]);
        }
        const double gnew = exp(lr[0] / rounds), gold = exp(lr[1] / rounds), gs = exp(ls / rounds);
        printf("%-10s %-6s %c%c %-4s %6d %10.4f %10.4f %8.4f\n", x->name, rows[r].forced ? "forced" : "pick",
               x->a_t ? 'T' : 'N', x->b_t ? 'T' : 'N', short_name(rows[r].cfg), rows[r].splits, gold, gnew, gs);
        int ci = N_CHANGED; /* V6 / other */
        for (int i = 0; i < N_CHANGED; i++)
            if (!strcmp(rows[r].cfg, CHANGED[i])) ci = i;
        gl[ci] += log(gs), gn[ci]++, gmin[ci] = gs < gmin[ci] ? gs : gmin[ci];
        if (!rows[r].forced) {
            pick_min = gs < pick_min ? gs : pick_min;
            if (!strcmp(x->set, "square")) sq[0] += log(gold), sq[1] += log(gnew), nsq++;
            else ot[0] += log(gold), ot[1] += log(gnew), not_++;
        }
    }
    if (nsq) printf("%-10s %-6s %2s %-4s %6s %10.4f %10.4f\n", "squares", "pick", "", "", "geo", exp(sq[0] / nsq), exp(sq[1] / nsq));
    if (not_) printf("%-10s %-6s %2s %-4s %6s %10.4f %10.4f\n", "gpt2", "pick", "", "", "geo", exp(ot[0] / not_), exp(ot[1] / not_));
    printf("new/old by configuration (geomean over its rows, lowest row):\n");
    for (int i = 0; i <= N_CHANGED; i++)
        if (gn[i])
            printf("  %-4s %2d rows: %.4f (lowest %.4f)%s\n", i < N_CHANGED ? SHORT[i] : "V6", gn[i], exp(gl[i] / gn[i]),
                   gmin[i], i < N_CHANGED ? (exp(gl[i] / gn[i]) >= 1.015 ? "  >= 1.015" : "  < 1.015") : "  (control: the same kernel)");
    printf("pick rows: lowest new/old %.4f%s\n", pick_min, pick_min < 0.99 ? "  BELOW 0.99" : "");
    printf("decision rule: keep a configuration's new loop where new/old >= 1.015 on the rows that run it and no pick "
           "row is below 0.99\n");
    free(h0), free(h1);
    return differ ? 1 : 0;
}
