/* Session 14 (helper h14b): the 128x128x16/8x8 main-loop variants (CML_F32_VARIANT, forced
 * here through cml__gemm_f32_force_variant) timed IN TURNS against cublasSgemm in one process
 * on f32_check's shapes (the squares and the 15 GPT-2 shapes; batched with --set). Reuses
 * f32_check.cu (its runtime stubs, shapes and L2-flushed event timer) by inclusion.
 *
 * For each round r and each shape: the pick's configuration and splits as the estimate chooses
 * them (variants only change V6 = 128x128x16/8x8; shapes that pick another configuration are
 * also run with V6 forced, column "forced"), then for each variant in rotating order (round r
 * starts at variant r) `reps` calls of that variant alternating with cuBLAS, medians. Before
 * timing, every variant's D is compared bitwise with variant 0's on each shape (one call each).
 * Prints one line per shape, round and variant, then the summary LAST: per shape and variant
 * the geometric mean over rounds of ours / cuBLAS and of variant / variant 0.
 *
 *   nvcc ... -c src/kernels/cuda/gemm/gemm_f32.cu -o gemm_f32.o   (as f32_check)
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I src -I include \
 *        dev/gemm_f32/s14_variants.cu gemm_f32.o -lcublas -o s14_variants
 *   ./s14_variants [--reps 7] [--rounds 3] [--variants 0,1,2,3] [--set square,gpt2] [--match x] */
#define main f32_check_main
#include "f32_check.cu"
#undef main

#include <math.h>

#define MAX_V 4
#define MAX_R 4
#define MAX_S 32

int main(int argc, char **argv) {
    int reps = 7, rounds = 3, nv = 0, vars[MAX_V];
    const char *sets = "square,gpt2", *match = "";
    const char *vlist = "0,1,2,3";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--variants") && i + 1 < argc) vlist = argv[++i];
        else if (!strcmp(argv[i], "--set") && i + 1 < argc) sets = argv[++i];
        else if (!strcmp(argv[i], "--match") && i + 1 < argc) match = argv[++i];
    }
    for (const char *p = vlist; *p && nv < MAX_V;) {
        const int v = atoi(p);
        if (v >= 0 && v < MAX_V) vars[nv++] = v;
        while (*p && *p != ',') p++;
        if (*p == ',') p++;
    }
    if (nv < 1 || vars[0] != 0) {
        printf("--variants must start with 0\n");
        return 2;
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

    size_t max_a = 0, max_b = 0, max_d = 0;
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
        const shape *x = &SHAPES[s];
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

    /* the rows of the table: each shape with the estimate's plan; shapes whose pick is not V6 also
     * with V6 forced (unsplit), since only V6 has variants */
    typedef struct row {
        const shape *x;
        bool forced;
        double ratio[MAX_R][MAX_V], speed[MAX_R][MAX_V];
    } row;
    static row rows[2 * MAX_S];
    int nrow = 0;
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
        const shape *x = &SHAPES[s];
        if (!strstr(sets, x->set) || !strstr(x->name, match)) continue;
        cml_gemm_desc d = cml_gemm_desc_init(x->a_t ? CML_OP_T : CML_OP_N, x->b_t ? CML_OP_T : CML_OP_N, x->M, x->N,
                                             x->K, x->batch, CML_F32, CML_F32);
        rows[nrow].x = x, rows[nrow].forced = false, nrow++;
        if (strcmp(cml__gemm_f32_config_name(&ctx, &d), "128x128x16/8x8") != 0 || cml__gemm_f32_splits(&ctx, &d) > 1)
            rows[nrow].x = x, rows[nrow].forced = true, nrow++;
    }

    /* bitwise: every variant's D equal to variant 0's */
    int differ = 0, compared = 0;
    for (int r = 0; r < nrow; r++) {
        const shape *x = rows[r].x;
        cml_gemm_desc d = cml_gemm_desc_init(x->a_t ? CML_OP_T : CML_OP_N, x->b_t ? CML_OP_T : CML_OP_N, x->M, x->N,
                                             x->K, x->batch, CML_F32, CML_F32);
        cml__gemm_f32_force_config(rows[r].forced ? "128x128x16/8x8" : NULL);
        cml__gemm_f32_force_splits(rows[r].forced ? 1 : 0);
        const size_t nd = (size_t)x->batch * x->M * x->N;
        for (int v = 0; v < nv; v++) {
            cml__gemm_f32_force_variant(vars[v]);
            CK(cudaMemsetAsync(D, 0xFF, nd * 4, stream));
            if (cml__gemm_f32(&ctx, &d, D, A, B, NULL) != CML_OK) {
                printf("FAILED: %s\n", last_error);
                return 1;
            }
            CK(cudaMemcpyAsync(v == 0 ? h0 : h1, D, nd * 4, cudaMemcpyDeviceToHost, stream));
            CK(cudaStreamSynchronize(stream));
            if (v > 0) {
                compared++;
                if (memcmp(h0, h1, nd * 4) != 0) {
                    differ++;
                    printf("  DIFFERS: %s %s variant %d vs 0\n", x->name, rows[r].forced ? "(V6 forced)" : "", vars[v]);
                }
            }
        }
    }
    printf("bitwise: %d variant runs compared with variant 0, %d differ\n", compared, differ);

    printf("\ntiming: TFLOP/s, median of %d calls, L2 flushed, each call of ours followed by one of cuBLAS\n", reps);
    for (int rd = 0; rd < rounds; rd++)
        for (int r = 0; r < nrow; r++) {
            const shape *x = rows[r].x;
            cml_gemm_desc d = cml_gemm_desc_init(x->a_t ? CML_OP_T : CML_OP_N, x->b_t ? CML_OP_T : CML_OP_N, x->M,
                                                 x->N, x->K, x->batch, CML_F32, CML_F32);
            cml__gemm_f32_force_config(rows[r].forced ? "128x128x16/8x8" : NULL);
            cml__gemm_f32_force_splits(rows[r].forced ? 1 : 0);
            const double flop = 2.0 * x->M * (double)x->N * x->K * x->batch;
            for (int k = 0; k < nv; k++) {
                const int vi = (k + rd) % nv; /* rotating order */
                cml__gemm_f32_force_variant(vars[vi]);
                float t[2][64];
                for (int i = -2; i < reps; i++)
                    for (int side = 0; side < 2; side++) {
                        const float ms = time_once(side, &d, D, A, B, i);
                        if (i >= 0) t[side][i] = ms;
                    }
                qsort(t[0], reps, 4, cmpf), qsort(t[1], reps, 4, cmpf);
                const double ref = flop / t[1][reps / 2] * 1e-9, ours = flop / t[0][reps / 2] * 1e-9;
                rows[r].ratio[rd][vi] = ours / ref;
                rows[r].speed[rd][vi] = ours;
                printf("round %d %-10s %-9s %c%c variant %d: cuBLAS %6.2f ours %6.2f ratio %.4f (%s%s)\n", rd, x->name,
                       rows[r].forced ? "V6forced" : "pick", x->a_t ? 'T' : 'N', x->b_t ? 'T' : 'N', vars[vi], ref, ours,
                       ours / ref, cml__gemm_f32_config_name(&ctx, &d),
                       cml__gemm_f32_splits(&ctx, &d) > 1 ? " split" : "");
                fflush(stdout);
            }
        }
    cml__gemm_f32_force_config(NULL);
    cml__gemm_f32_force_splits(0);
    cml__gemm_f32_force_variant(-1);

    printf("\n== summary: ratio to cuBLAS (geomean of %d rounds) and variant / variant 0 speed\n", rounds);
    printf("%-10s %-9s %2s", "shape", "plan", "op");
    for (int v = 0; v < nv; v++) printf("   v%d/cuBLAS", vars[v]);
    for (int v = 1; v < nv; v++) printf("  v%d/v0", vars[v]);
    printf("\n");
    double gsum[2][MAX_V][2] = {{{0}}}; /* [square|gpt2][variant][ratio, speedup] */
    int gn[2] = {0, 0};
    for (int r = 0; r < nrow; r++) {
        const shape *x = rows[r].x;
        printf("%-10s %-9s %c%c", x->name, rows[r].forced ? "V6forced" : "pick", x->a_t ? 'T' : 'N', x->b_t ? 'T' : 'N');
        double gr[MAX_V], gs[MAX_V];
        for (int v = 0; v < nv; v++) {
            double lr = 0, ls = 0;
            for (int rd = 0; rd < rounds; rd++)
                lr += log(rows[r].ratio[rd][v]), ls += log(rows[r].speed[rd][v] / rows[r].speed[rd][0]);
            gr[v] = exp(lr / rounds), gs[v] = exp(ls / rounds);
            printf("   %10.4f", gr[v]);
        }
        for (int v = 1; v < nv; v++) printf("  %6.4f", gs[v]);
        printf("\n");
        if (!rows[r].forced) {
            const int g = strcmp(x->set, "square") == 0 ? 0 : 1;
            for (int v = 0; v < nv; v++) gsum[g][v][0] += log(gr[v]), gsum[g][v][1] += log(gs[v]);
            gn[g]++;
        }
    }
    for (int g = 0; g < 2; g++) {
        if (!gn[g]) continue;
        printf("%-10s %-9s %2s", g == 0 ? "squares" : "others", "geomean", "");
        for (int v = 0; v < nv; v++) printf("   %10.4f", exp(gsum[g][v][0] / gn[g]));
        for (int v = 1; v < nv; v++) printf("  %6.4f", exp(gsum[g][v][1] / gn[g]));
        printf("\n");
    }
    printf("decision rule: a variant becomes the default where it wins >= 1.5%% (v/v0 >= 1.015) with no pick row below 0.99\n");
    free(h0), free(h1);
    return differ ? 1 : 0;
}
