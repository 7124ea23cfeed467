/* Reverse-mode autograd: accumulation into leaves, shared subexpressions,
 * no_grad and detach, the errors of backward (twice through a freed graph,
 * roots that need no gradient, bad grad_root), zero_grad/clear_grad, a deep
 * chain (no recursion), gradients through views, and memory: the graph is
 * freed by backward and everything returns to the allocator. */
#include "framework_test_util.h"

#ifndef __STDC_NO_THREADS__
#include <threads.h>
#endif

static cml_tensor *vec(int64_t n, const float *v) { return ft_from(1, &n, v); }

static cml_tensor *leaf_vec(int64_t n, const float *v) {
    cml_tensor *t = vec(n, v);
    cml_tensor_set_requires_grad(t, true);
    return t;
}

static void check_grad(const cml_tensor *leaf, const double *want, double tol, const char *what) {
    const cml_tensor *g = cml_tensor_grad(leaf);
    if (!g) {
        th_failed_checks++;
        fprintf(stderr, "  %s: no gradient\n", what);
        return;
    }
    FT_CHECK_CLOSE(g, cml_tensor_ndim(leaf), cml_tensor_shape(leaf), want, tol, what);
}

static void test_accumulation_across_backward_calls(void) {
    const float xv[3] = {1, -2, 0.5f};
    cml_tensor *x = leaf_vec(3, xv);
    CHECK(cml_tensor_requires_grad(x) && !cml_tensor_has_grad_fn(x) && cml_tensor_grad_fn_name(x) == NULL);
    /* graph 1: sum(2x) */
    cml_tensor *a = cml_mul_scalar(x, 2.0), *la = cml_sum(a, NULL, 0, false);
    CHECK_OK(cml_backward(la, NULL));
    const double g1[3] = {2, 2, 2};
    check_grad(x, g1, 0, "after the first backward");
    const cml_tensor *grad_before = cml_tensor_grad(x);
    const void *data_before = grad_before ? cml_tensor_data(grad_before) : NULL;
    /* graph 2: sum(x * x): adds 2x */
    cml_tensor *b = cml_mul(x, x), *lb = cml_sum(b, NULL, 0, false);
    CHECK_OK(cml_backward(lb, NULL));
    const double g2[3] = {4, -2, 3};
    check_grad(x, g2, 0, "gradients accumulate (+=) across backward calls");
    /* the leaf's gradient is updated in place (views of it stay valid) */
    CHECK(cml_tensor_grad(x) == grad_before && cml_tensor_grad(x) && cml_tensor_data(cml_tensor_grad(x)) == data_before);
    /* a backward with an explicit grad_root on a non-scalar root */
    cml_tensor *c = cml_mul_scalar(x, 3.0);
    const float gr[3] = {1, 10, 100};
    cml_tensor *groot = vec(3, gr);
    CHECK_OK(cml_backward(c, groot));
    const double g3[3] = {7, 28, 303};
    check_grad(x, g3, 0, "explicit grad_root");
    FT_RELEASE(x, a, la, b, lb, c, groot);
}

static void test_diamond(void) {
    const float xv[4] = {0.5f, -1, 2, 0.25f};
    cml_tensor *x = leaf_vec(4, xv);
    /* a = 3x; b = a * a (a used twice); c = a + b + exp(a) (a used three more times) */
    cml_tensor *a = cml_mul_scalar(x, 3.0);
    cml_tensor *b = cml_mul(a, a);
    cml_tensor *e = cml_exp(a);
    cml_tensor *ab = cml_add(a, b);
    cml_tensor *c = cml_add(ab, e);
    cml_tensor *l = cml_sum(c, NULL, 0, false);
    FT_RELEASE(a, b, e, ab, c); /* the graph keeps what it needs */
    CHECK_OK(cml_backward(l, NULL));
    double want[4];
    for (int i = 0; i < 4; i++) want[i] = 3.0 + 18.0 * xv[i] + 3.0 * exp(3.0 * xv[i]);
    check_grad(x, want, 1e-6, "diamond");
    cml_tensor_release(l);
    /* x * x: the same input in both slots */
    cml_tensor *sq = cml_mul(x, x), *ls = cml_sum(sq, NULL, 0, false);
    cml_tensor_zero_grad(x);
    CHECK_OK(cml_backward(ls, NULL));
    for (int i = 0; i < 4; i++) want[i] = 2.0 * xv[i];
    check_grad(x, want, 0, "x * x");
    FT_RELEASE(x, sq, ls);
}

static void test_no_grad(void) {
    const float xv[2] = {1, 2};
    cml_tensor *x = leaf_vec(2, xv);
    CHECK(cml_grad_enabled());
    bool prev = cml_set_grad_enabled(false);
    CHECK(prev && !cml_grad_enabled());
    cml_tensor *y = cml_mul(x, x), *r = cml_reshape(x, 2, (int64_t[]){1, 2}), *s = cml_sum(x, NULL, 0, false);
    CHECK(y && !cml_tensor_requires_grad(y) && !cml_tensor_has_grad_fn(y));
    CHECK(r && !cml_tensor_requires_grad(r) && !cml_tensor_has_grad_fn(r));
    CHECK(s && !cml_tensor_requires_grad(s));
    /* nested scopes restore their outer state */
    bool inner_prev = cml_set_grad_enabled(true);
    CHECK(!inner_prev && cml_grad_enabled());
    cml_tensor *z = cml_exp(x);
    CHECK(z && cml_tensor_requires_grad(z) && strcmp(cml_tensor_grad_fn_name(z), "exp") == 0);
    cml_set_grad_enabled(inner_prev);
    CHECK(!cml_grad_enabled());
    cml_set_grad_enabled(prev);
    CHECK(cml_grad_enabled());
    CHECK_STATUS(cml_backward(s, NULL), CML_ERR_STATE, "does not require grad");
    CHECK(cml_tensor_grad(x) == NULL);
    FT_RELEASE(x, y, r, s, z);
}

static void test_detach(void) {
    const float xv[3] = {1, 2, 3};
    cml_tensor *x = leaf_vec(3, xv);
    cml_tensor *twice = cml_mul_scalar(x, 2.0);
    cml_tensor *d = cml_detach(twice);
    CHECK(d && !cml_tensor_requires_grad(d) && !cml_tensor_has_grad_fn(d));
    CHECK(d && cml_tensor_data(d) == cml_tensor_data(twice)); /* shares the data */
    /* L = sum(d * x): d is a constant, so dL/dx = d = 2x (not 4x) */
    cml_tensor *p = cml_mul(d, x), *l = cml_sum(p, NULL, 0, false);
    CHECK_OK(cml_backward(l, NULL));
    const double want[3] = {2, 4, 6};
    check_grad(x, want, 0, "detach cuts the graph");
    /* a detached leaf view */
    cml_tensor *dx = cml_detach(x);
    CHECK(dx && !cml_tensor_requires_grad(dx) && cml_tensor_grad(dx) == NULL);
    cml_clear_error();
    CHECK(cml_detach(NULL) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_detach");
    FT_RELEASE(x, twice, d, p, l, dx);
}

static void test_backward_errors(void) {
    const float xv[3] = {1, 2, 3};
    cml_tensor *x = leaf_vec(3, xv);
    cml_tensor *y = cml_exp(x), *l = cml_sum(y, NULL, 0, false);
    CHECK_OK(cml_backward(l, NULL));
    /* the graph is freed: a second backward through it is a state error */
    CHECK_STATUS(cml_backward(l, NULL), CML_ERR_STATE, "already freed");
    cml_tensor *g3 = cml_tensor_ones(1, (int64_t[]){3}, CML_F32, CML_DEVICE_CPU);
    CHECK_STATUS(cml_backward(y, g3), CML_ERR_STATE, "already freed");
    /* a new graph built on a tensor of the freed one fails when it reaches it */
    cml_tensor *y2 = cml_mul_scalar(y, 2.0), *l2 = cml_sum(y2, NULL, 0, false);
    CHECK_STATUS(cml_backward(l2, NULL), CML_ERR_STATE, "already freed");
    double want[3];
    for (int i = 0; i < 3; i++) want[i] = exp(xv[i]);
    check_grad(x, want, 1e-6, "the first backward's gradient is untouched");

    /* roots that cannot be differentiated */
    const float cv[2] = {1, 2};
    cml_tensor *c = vec(2, cv), *cs = cml_sum(c, NULL, 0, false);
    CHECK_STATUS(cml_backward(cs, NULL), CML_ERR_STATE, "cml_backward: root does not require grad");
    CHECK_STATUS(cml_backward(NULL, NULL), CML_ERR_INVALID_ARG, "cml_backward: root must not be NULL");
    cml_tensor *v = cml_mul_scalar(x, 2.0);
    CHECK_STATUS(cml_backward(v, NULL), CML_ERR_SHAPE, "grad_root may be NULL only for a one-element root");
    cml_tensor *g2 = cml_tensor_ones(1, (int64_t[]){2}, CML_F32, CML_DEVICE_CPU);
    CHECK_STATUS(cml_backward(v, g2), CML_ERR_SHAPE, "grad_root must have root's shape");
    /* the failed calls did not free the graph: a correct one still works */
    cml_tensor_clear_grad(x);
    CHECK_OK(cml_backward(v, g3));
    const double two[3] = {2, 2, 2};
    check_grad(x, two, 0, "backward after rejected calls");
    FT_RELEASE(x, y, l, g3, y2, l2, c, cs, v, g2);
}

static void test_leaf_root_and_partial_requires_grad(void) {
    cml_tensor *s = cml_tensor_scalar(4.0, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(s, true);
    CHECK_OK(cml_backward(s, NULL));
    const double one = 1.0;
    check_grad(s, &one, 0, "a leaf as the root");
    /* only one of two inputs requires grad: the other gets no gradient */
    const float av[2] = {1, 2}, bv[2] = {3, 4};
    cml_tensor *a = leaf_vec(2, av), *b = vec(2, bv);
    cml_tensor *p = cml_mul(a, b), *l = cml_sum(p, NULL, 0, false);
    CHECK_OK(cml_backward(l, NULL));
    const double wa[2] = {3, 4};
    check_grad(a, wa, 0, "the input that requires grad");
    CHECK(cml_tensor_grad(b) == NULL);
    /* turning requires_grad off: later ops record nothing */
    cml_tensor_set_requires_grad(a, false);
    cml_tensor *q = cml_mul(a, b);
    CHECK(q && !cml_tensor_requires_grad(q));
    FT_RELEASE(s, a, b, p, l, q);
}

static void test_zero_and_clear_grad(void) {
    const float xv[4] = {1, 2, 3, 4};
    cml_tensor *x = leaf_vec(4, xv);
    cml_tensor_zero_grad(x); /* no gradient yet: a no-op */
    CHECK(cml_tensor_grad(x) == NULL);
    cml_tensor *l = cml_sum(x, NULL, 0, false);
    CHECK_OK(cml_backward(l, NULL));
    cml_tensor *g = cml_tensor_grad(x);
    CHECK_NOT_NULL(g);
    cml_tensor_zero_grad(x);
    CHECK(cml_tensor_grad(x) == g); /* same tensor, same memory */
    const double zeros[4] = {0}, ones[4] = {1, 1, 1, 1};
    check_grad(x, zeros, 0, "zero_grad");
    cml_tensor *l2 = cml_sum(x, NULL, 0, false);
    CHECK_OK(cml_backward(l2, NULL));
    check_grad(x, ones, 0, "backward after zero_grad");
    size_t before = cml_cpu_bytes_in_use();
    cml_tensor_clear_grad(x);
    CHECK(cml_tensor_grad(x) == NULL);
    CHECK(cml_cpu_bytes_in_use() + 4 * sizeof(float) <= before); /* the gradient's memory is freed */
    cml_tensor_clear_grad(x);   /* twice is fine */
    cml_tensor_clear_grad(NULL);
    cml_tensor_zero_grad(NULL);
    cml_tensor *l3 = cml_sum(x, NULL, 0, false);
    CHECK_OK(cml_backward(l3, NULL));
    check_grad(x, ones, 0, "backward after clear_grad");
    FT_RELEASE(x, l, l2, l3);
}

/* y = x; repeated y = y * 1.0001 + 0.001 (10000 ops): backward must not recurse per node. */
#define DEEP 10000
/* Releasing a graph that never ran backward must not recurse per node either
 * (this depth overflowed an 8 MiB stack when it did). */
#define DEEP_RELEASE 300000

static cml_tensor *deep_chain(cml_tensor *x, int depth) {
    cml_tensor *y = cml_tensor_retain(x);
    for (int i = 0; i < depth; i++) {
        cml_tensor *n = (i % 2) ? cml_add_scalar(y, 0.001) : cml_mul_scalar(y, 1.0001);
        cml_tensor_release(y);
        y = n;
        if (!y) break;
    }
    return y;
}

static void test_deep_chain(void) {
    cml_tensor *x = cml_tensor_scalar(1.0, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(x, true);
    cml_tensor *y = deep_chain(x, DEEP);
    CHECK_NOT_NULL(y);
    if (y) {
        CHECK_OK(cml_backward(y, NULL));
        double want = pow(1.0001, DEEP / 2);
        check_grad(x, &want, 1e-3, "deep chain"); /* 5000 f32 roundings of 1.0001 */
    }
    cml_tensor_release(y);
    /* releasing an un-run deep graph must not overflow the stack either */
    cml_tensor *z = deep_chain(x, DEEP_RELEASE);
    CHECK_NOT_NULL(z);
    cml_tensor_release(z);
    /* a wide fan-in: one leaf used by many nodes */
    cml_tensor *acc = cml_tensor_retain(x);
    for (int i = 0; i < 1000 && acc; i++) {
        cml_tensor *n = cml_add(acc, x);
        cml_tensor_release(acc);
        acc = n;
    }
    cml_tensor_clear_grad(x);
    CHECK(acc && cml_backward(acc, NULL) == CML_OK);
    const double w = 1001.0;
    check_grad(x, &w, 0, "fan-in of 1001 uses");
    FT_RELEASE(x, acc);
}

/* A small MLP-like graph with views, broadcasting, reductions and matmul. */
static cml_tensor *build_graph(cml_tensor *w, cml_tensor *x) {
    cml_tensor *h = cml_matmul(x, w);               /* (8, 16) */
    cml_tensor *t = cml_tanh(h);
    cml_tensor *tt = cml_transpose(t, 0, 1);         /* (16, 8) */
    cml_tensor *s = cml_slice(tt, 0, 2, 14, 3);      /* (4, 8) */
    cml_tensor *sm = cml_softmax(s, 0);
    cml_tensor *m = cml_mean(sm, (int[]){1}, 1, true);
    cml_tensor *d = cml_sub(sm, m);
    cml_tensor *sq = cml_mul(d, d);
    cml_tensor *l = cml_sum(sq, NULL, 0, false);
    FT_RELEASE(h, t, tt, s, sm, m, d, sq);
    return l;
}

static void test_graph_freed_and_memory(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 60);
    int64_t sw[2] = {32, 16}, sx[2] = {8, 32};
    cml_tensor *w = ft_leaf(2, sw, FT_UNIFORM(-0.3, 0.3), &rng);
    cml_tensor *x = ft_make(2, sx, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
    /* warm-up: kernels may grow their context's workspace once */
    cml_tensor *l0 = build_graph(w, x);
    CHECK_OK(cml_backward(l0, NULL));
    cml_tensor_release(l0);
    cml_tensor_clear_grad(w);
    size_t base = cml_cpu_bytes_in_use();

    cml_tensor *l = build_graph(w, x);
    CHECK_NOT_NULL(l);
    size_t with_graph = cml_cpu_bytes_in_use();
    CHECK(with_graph > base); /* the graph holds intermediates and saved tensors */
    CHECK_OK(cml_backward(l, NULL));
    size_t grad_bytes = 32 * 16 * sizeof(float);
    /* after backward only the root, its node and w's gradient remain */
    CHECK_MSG(cml_cpu_bytes_in_use() <= base + grad_bytes + 64 * sizeof(float),
              "%zu bytes in use after backward, baseline %zu + gradient %zu", cml_cpu_bytes_in_use(), base, grad_bytes);
    cml_tensor_release(l);
    cml_tensor_clear_grad(w);
    CHECK_MSG(cml_cpu_bytes_in_use() == base, "%zu bytes in use, baseline %zu", cml_cpu_bytes_in_use(), base);

    /* a graph released without backward is freed too */
    cml_tensor *l2 = build_graph(w, x);
    cml_tensor_release(l2);
    CHECK_MSG(cml_cpu_bytes_in_use() == base, "%zu bytes in use, baseline %zu", cml_cpu_bytes_in_use(), base);
    /* as is one whose backward failed halfway (bad grad_root) */
    cml_tensor *l3 = build_graph(w, x);
    cml_tensor *bad = cml_tensor_ones(1, (int64_t[]){2}, CML_F32, CML_DEVICE_CPU);
    CHECK(cml_backward(l3, bad) == CML_ERR_SHAPE);
    FT_RELEASE(l3, bad);
    CHECK_MSG(cml_cpu_bytes_in_use() == base, "%zu bytes in use, baseline %zu", cml_cpu_bytes_in_use(), base);
    FT_RELEASE(w, x);
}

/* Gradients through views of a leaf: slices, transposes, expand, reshape, to_dtype. */
static cml_tensor *views_fn(cml_tensor *const *in, int n, void *user) {
    cml_tensor *x = in[0];                                     /* (4, 6) */
    cml_tensor *t = cml_transpose(x, 0, 1);                    /* (6, 4) */
    cml_tensor *s = cml_slice(t, 0, 1, 6, 2);                  /* (3, 4) */
    cml_tensor *r = cml_reshape(s, 2, (int64_t[]){4, 3});      /* a copy: s is not viewable as (4, 3) */
    cml_tensor *u = cml_unsqueeze(r, 0);                       /* (1, 4, 3) */
    cml_tensor *e = cml_expand(u, 3, (int64_t[]){2, 4, 3});
    cml_tensor *f = cml_flatten(e, 0, 1);                      /* (8, 3) */
    cml_tensor *h = cml_to_dtype(f, CML_BF16), *b = cml_to_dtype(h, CML_F32);
    cml_tensor *c = cml_contiguous(t);
    cml_tensor *cs = cml_sum(c, (int[]){0}, 1, false);         /* (4) */
    cml_tensor *row = cml_slice(b, 0, 0, 1, 1);                /* (1, 3) */
    cml_tensor *sq = cml_squeeze(row, 0);                      /* (3) */
    cml_tensor *cl = cml_clone(sq);
    cml_tensor *y = cml_concat((cml_tensor *[]){cs, cl}, 2, 0);
    FT_RELEASE(t, s, r, u, e, f, h, b, c, cs, row, sq, cl);
    return y;
}

static void test_gradients_through_views(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 61);
    int64_t shape[2] = {4, 6};
    /* bf16 rounding inside f: use values bf16 represents exactly, and a wider tolerance */
    cml_tensor *x = ft_make(2, shape, FT_CONTIG, FT_GRID(-1, 1, 0.125), &rng);
    cml_tensor_set_requires_grad(x, true);
    cml_gradcheck_opts opts = {0.125, 1e-2, 1e-2, 3};
    cml_clear_error();
    cml_status s = cml_gradcheck(views_fn, &x, 1, NULL, &opts);
    CHECK_MSG(s == CML_OK, "gradcheck through views: %s", cml_last_error());
    cml_tensor_release(x);
}

/* cml_gradcheck itself: it must catch a wrong gradient and check its arguments. */
static cml_tensor *wrong_grad_fn(cml_tensor *const *in, int n, void *user) {
    /* y = x * detach(x): the analytic gradient misses the detached factor */
    cml_tensor *d = cml_detach(in[0]);
    cml_tensor *y = cml_mul(in[0], d);
    cml_tensor_release(d);
    return y;
}

static cml_tensor *square_fn(cml_tensor *const *in, int n, void *user) { return cml_mul(in[0], in[0]); }

static void test_gradcheck_itself(void) {
    const float xv[3] = {0.5f, 1.0f, -2.0f};
    cml_tensor *x = leaf_vec(3, xv);
    CHECK_STATUS(cml_gradcheck(wrong_grad_fn, &x, 1, NULL, NULL), CML_ERR_INTERNAL, "cml_gradcheck: input 0 element 0");
    CHECK_OK(cml_gradcheck(square_fn, &x, 1, NULL, NULL));
    /* arguments */
    CHECK_STATUS(cml_gradcheck(NULL, &x, 1, NULL, NULL), CML_ERR_INVALID_ARG, "cml_gradcheck");
    CHECK_STATUS(cml_gradcheck(square_fn, &x, 0, NULL, NULL), CML_ERR_INVALID_ARG, "n > 0");
    cml_tensor *nul = NULL;
    CHECK_STATUS(cml_gradcheck(square_fn, &nul, 1, NULL, NULL), CML_ERR_INVALID_ARG, "inputs[0] is NULL");
    int64_t s23[2] = {2, 3};
    cml_tensor *base = cml_tensor_ones(2, s23, CML_F32, CML_DEVICE_CPU), *t = cml_transpose(base, 0, 1);
    cml_tensor_set_requires_grad(t, true);
    CHECK_STATUS(cml_gradcheck(square_fn, &t, 1, NULL, NULL), CML_ERR_INVALID_ARG, "inputs[0] must be a contiguous f32 CPU leaf");
    cml_tensor *h = cml_tensor_ones(2, s23, CML_BF16, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(h, true);
    CHECK_STATUS(cml_gradcheck(square_fn, &h, 1, NULL, NULL), CML_ERR_INVALID_ARG, "contiguous f32 CPU leaf");
    FT_RELEASE(x, base, t, h);
}

#ifndef __STDC_NO_THREADS__
static int grad_mode_thread(void *arg) {
    bool *seen = arg;
    seen[0] = cml_grad_enabled(); /* a new thread starts with grad mode on */
    cml_set_grad_enabled(false);
    seen[1] = cml_grad_enabled();
    return 0;
}
#endif

/* Grad mode is per thread. */
static void test_grad_mode_per_thread(void) {
#ifndef __STDC_NO_THREADS__
    bool prev = cml_set_grad_enabled(false);
    bool seen[2] = {false, true};
    thrd_t th;
    CHECK(thrd_create(&th, grad_mode_thread, seen) == thrd_success);
    CHECK(thrd_join(th, NULL) == thrd_success);
    CHECK(seen[0] && !seen[1]);
    CHECK(!cml_grad_enabled()); /* the other thread's change did not leak here */
    cml_set_grad_enabled(true);
    CHECK(cml_grad_enabled());
    cml_set_grad_enabled(prev);
#endif
}

int main(void) {
    RUN(test_accumulation_across_backward_calls);
    RUN(test_diamond);
    RUN(test_no_grad);
    RUN(test_detach);
    RUN(test_backward_errors);
    RUN(test_leaf_root_and_partial_requires_grad);
    RUN(test_zero_and_clear_grad);
    RUN(test_deep_chain);
    RUN(test_graph_freed_and_memory);
    RUN(test_gradients_through_views);
    RUN(test_gradcheck_itself);
    RUN(test_grad_mode_per_thread);
    return th_finish();
}
