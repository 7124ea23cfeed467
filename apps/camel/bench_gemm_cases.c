/* The cases of camel bench gemm and the parsers of its flags (see cmd_bench_gemm.c). */
#include <stdlib.h>
#include <string.h>

#include "bench_gemm.h"

static const char *const DTYPE_NAMES[BG_DTYPE_COUNT] = {"bf16", "fp16", "tf32", "f32", "e4m3"};
static const char *const SET_NAMES[BG_SET_COUNT] = {"square", "gpt2", "odd", "batched", "grouped"};

const char *bg_dtype_name(bg_dtype dt) { return DTYPE_NAMES[dt]; }
const char *bg_set_name(bg_set s) { return SET_NAMES[s]; }

/* Calls word(text of one item, its length, state) for each comma-separated item; false if one fails. */
static bool each_word(const char *text, bool (*word)(const char *w, size_t n, void *state), void *state) {
    const char *p = text;
    for (;;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || !word(p, n, state)) return false;
        if (p[n] == '\0') return true;
        p += n + 1;
    }
}

static int find_name(const char *w, size_t n, const char *const *names, int count) {
    for (int i = 0; i < count; i++)
        if (strlen(names[i]) == n && strncmp(names[i], w, n) == 0) return i;
    return -1;
}

static bool dtype_word(const char *w, size_t n, void *state) {
    int i = find_name(w, n, DTYPE_NAMES, BG_DTYPE_COUNT);
    if (i < 0) return false;
    ((bool *)state)[i] = true;
    return true;
}

static bool set_word(const char *w, size_t n, void *state) {
    bool *out = state;
    if (n == 3 && strncmp(w, "all", 3) == 0) {
        for (int i = 0; i < BG_SET_COUNT; i++) out[i] = true;
        return true;
    }
    int i = find_name(w, n, SET_NAMES, BG_SET_COUNT);
    if (i < 0) return false;
    out[i] = true;
    return true;
}

bool bg_parse_dtypes(const char *text, bool out[BG_DTYPE_COUNT]) {
    memset(out, 0, sizeof(bool) * BG_DTYPE_COUNT);
    return each_word(text, dtype_word, out);
}

bool bg_parse_sets(const char *text, bool out[BG_SET_COUNT]) {
    memset(out, 0, sizeof(bool) * BG_SET_COUNT);
    return each_word(text, set_word, out);
}

int bg_parse_ints(const char *text, int64_t *out, int max) {
    int n = 0;
    for (const char *p = text; *p;) {
        char *end = NULL;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 1 || v > (1 << 20) || n == max || (*end != ',' && *end != '\0')) return -1;
        out[n++] = v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

int bg_parse_ops(const char *text, cml_op (*out)[2], int max) {
    int n = 0;
    for (const char *p = text; *p;) {
        if ((p[0] != 'N' && p[0] != 'T') || (p[1] != 'N' && p[1] != 'T') || (p[2] != ',' && p[2] != '\0') || n == max)
            return -1;
        out[n][0] = p[0] == 'T' ? CML_OP_T : CML_OP_N;
        out[n][1] = p[1] == 'T' ? CML_OP_T : CML_OP_N;
        n++;
        p += p[2] == ',' ? 3 : 2;
    }
    return n;
}

double bg_case_flop(const bg_case *c) { return 2.0 * (double)c->M * (double)c->N * (double)c->K * (double)c->batch; }

typedef struct case_list {
    bg_case *out;
    int n, max;
} case_list;

static void add(case_list *l, bg_set set, bg_dtype dt, const char *op, const char *name, cml_op op_a, cml_op op_b,
                int64_t M, int64_t N, int64_t K, int64_t batch) {
    if (l->n >= l->max) return;
    bg_case *c = &l->out[l->n++];
    memset(c, 0, sizeof *c);
    c->set = set;
    c->dt = dt;
    c->op = op;
    c->name = name;
    c->op_a = op_a;
    c->op_b = op_b;
    c->M = M;
    c->N = N;
    c->K = K;
    c->batch = batch;
}

/* GPT-2 124M at --tokens tokens (8192 by default): (name, N, K) of each Linear, weights stored (N, K). */
static const struct {
    const char *name;
    int64_t N, K;
} GPT2_LINEARS[] = {{"attn_qkv", 2304, 768}, {"attn_proj", 768, 768}, {"mlp_fc", 3072, 768},
                    {"mlp_proj", 768, 3072}, {"lm_head", 50304, 768}};

/* The grouped set: 8 problems of different M sharing N = K = 4096 (the experts of a mixture). */
static const int64_t GROUP_M[BG_MAX_GROUP] = {256, 512, 768, 1024, 1280, 1536, 1792, 2048};
#define GROUP_NK 4096

int bg_make_cases(const bg_options *o, bg_case *out, int max) {
    case_list l = {out, 0, max};
    for (int s = 0; s < BG_SET_COUNT; s++) {
        if (!o->sets[s]) continue;
        for (int d = 0; d < BG_DTYPE_COUNT; d++) {
            if (!o->dtypes[d]) continue;
            const bg_dtype dt = (bg_dtype)d;
            const bool fp8 = dt == BG_E4M3, wide = dt == BG_F32 || dt == BG_TF32;
            const int n_ops = fp8 ? 1 : o->n_ops; /* cuBLASLt fp8: op_a = N, op_b = T only */
            switch ((bg_set)s) {
            case BG_SQUARE:
                for (int i = 0; i < o->n_sizes; i++) {
                    const int64_t n = o->sizes[i];
                    if (wide && n > o->max_f32) continue;
                    for (int k = 0; k < n_ops; k++)
                        add(&l, BG_SQUARE, dt, "gemm", "square", fp8 ? CML_OP_N : o->ops[k][0],
                            fp8 ? CML_OP_T : o->ops[k][1], n, n, n, 1);
                }
                break;
            case BG_GPT2:
                for (size_t i = 0; i < sizeof GPT2_LINEARS / sizeof GPT2_LINEARS[0]; i++) {
                    const int64_t T = o->tokens, N = GPT2_LINEARS[i].N, K = GPT2_LINEARS[i].K;
                    const char *name = GPT2_LINEARS[i].name;
                    add(&l, BG_GPT2, dt, "gpt2_fwd", name, CML_OP_N, CML_OP_T, T, N, K, 1); /* Y = X W^T */
                    if (fp8) continue;
                    add(&l, BG_GPT2, dt, "gpt2_dx", name, CML_OP_N, CML_OP_N, T, K, N, 1);  /* dX = dY W */
                    add(&l, BG_GPT2, dt, "gpt2_dw", name, CML_OP_T, CML_OP_N, N, K, T, 1);  /* dW = dY^T X */
                }
                break;
            case BG_ODD:
                for (int k = 0; k < n_ops; k++) {
                    const cml_op a = fp8 ? CML_OP_N : o->ops[k][0], b = fp8 ? CML_OP_T : o->ops[k][1];
                    add(&l, BG_ODD, dt, "gemm", "odd", a, b, 3000, 5000, 1000, 1);
                    add(&l, BG_ODD, dt, "gemm", "odd", a, b, 1025, 1025, 1025, 1);
                }
                break;
            case BG_BATCHED: {
                const cml_op b = fp8 ? CML_OP_T : CML_OP_N;
                add(&l, BG_BATCHED, dt, "batched", "64x1024^3", CML_OP_N, b, 1024, 1024, 1024, 64);
                /* the same problems as one GEMM (A's stacked, one B: as the grouped set's), and the same flops as
                 * one square-ish GEMM, whose N of 8192 reads far fewer bytes per flop */
                add(&l, BG_BATCHED, dt, "batched_as_one", "65536x1024x1024", CML_OP_N, b, 65536, 1024, 1024, 1);
                add(&l, BG_BATCHED, dt, "batched_same_flops", "8192x8192x1024", CML_OP_N, b, 8192, 8192, 1024, 1);
                break;
            }
            case BG_GROUPED: {
                int64_t sum = 0;
                for (int i = 0; i < BG_MAX_GROUP; i++) sum += GROUP_M[i];
                const int before = l.n;
                add(&l, BG_GROUPED, dt, "grouped", "8 experts", CML_OP_N, CML_OP_T, sum, GROUP_NK, GROUP_NK, 1);
                if (l.n > before) {
                    bg_case *c = &l.out[l.n - 1];
                    c->group_count = BG_MAX_GROUP;
                    memcpy(c->group_m, GROUP_M, sizeof GROUP_M);
                }
                add(&l, BG_GROUPED, dt, "grouped_as_one", "8 experts", CML_OP_N, CML_OP_T, sum, GROUP_NK, GROUP_NK, 1);
                break;
            }
            default: break;
            }
        }
    }
    return l.n;
}
