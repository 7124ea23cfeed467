/* The GEMM's division by multiply (src/kernels/cuda/common/fast_div.h) against the hardware's integer division: every
 * divisor up to 4096, the powers of two and their neighbours up to 2^31 - 1, and random divisors, each with the
 * numerators where a quotient changes (k d - 1, k d), the extremes and random ones below 2^31. */
#include "harness.h"
#include "kernels/cuda/common/fast_div.h"

static uint64_t fd_rng = 0x9E3779B97F4A7C15ull;
static uint32_t fd_next(void) { /* xorshift64* */
    fd_rng ^= fd_rng >> 12, fd_rng ^= fd_rng << 25, fd_rng ^= fd_rng >> 27;
    return (uint32_t)((fd_rng * 2685821657736338717ull) >> 32);
}

static long long fd_wrong;

static void check_divisor(int d) {
    const cml__fast_div v = cml__fast_div_make(d);
    int ns[64], k = 0;
    ns[k++] = 0, ns[k++] = 1, ns[k++] = 0x7FFFFFFF, ns[k++] = 0x7FFFFFFE;
    const int64_t top = (int64_t)0x7FFFFFFF / d; /* the largest quotient */
    const int64_t qs[] = {1, 2, 3, top / 2, top - 1, top};
    for (int i = 0; i < 6; i++)
        if (qs[i] >= 1 && qs[i] <= top) {
            ns[k++] = (int)(qs[i] * d - 1);
            ns[k++] = (int)(qs[i] * d);
        }
    while (k < 64) ns[k++] = (int)(fd_next() & 0x7FFFFFFF);
    for (int i = 0; i < k; i++) {
        const int got = cml__fast_div_q(ns[i], v), want = ns[i] / d;
        if (got != want && fd_wrong++ < 10)
            CHECK_MSG(got == want, "%d / %d: %d by multiply, %d by division", ns[i], d, got, want);
    }
}

static void test_fast_div(void) {
    fd_wrong = 0;
    for (int d = 1; d <= 4096; d++) check_divisor(d);
    for (int p = 12; p <= 31; p++)
        for (int e = -1; e <= 1; e++) {
            const int64_t d = ((int64_t)1 << p) + e;
            if (d < 0x7FFFFFFF) check_divisor((int)d);
        }
    check_divisor(0x7FFFFFFF - 1);
    check_divisor(0x7FFFFFFF);
    for (int i = 0; i < 20000; i++) check_divisor(1 + (int)(fd_next() % 0x7FFFFFFE));
    CHECK_MSG(fd_wrong == 0, "%lld quotients wrong", fd_wrong);
}

int main(void) {
    RUN(test_fast_div);
    return th_finish();
}
