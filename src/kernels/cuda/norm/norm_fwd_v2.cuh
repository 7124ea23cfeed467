/* Which forward kernels the LayerNorm / RMSNorm forward runs for 16-bit rows held on chip (the
 * packed-word register rows and the one-pass chunks of long aligned rows), by a MODE template flag:
 * 0 = the kernels through session 12 (software pack);
 * 1 = y packed by the hardware's round-to-nearest-even (cml__pack16_fast: one cvt.rn.bf16x2.f32 per
 *     two elements, where cml__pack16's software rounding takes 7-8 instructions per element);
 * 2 = as 1, plus residency: the register rows of 4 words a thread in blocks of at most 256 threads
 *     run at 6 (LayerNorm) / 5 (RMSNorm) blocks per SM (40 / 48 registers; the old bound of 1024
 *     threads let ptxas take 54-64, so 4 blocks), and the LayerNorm one-pass chunk at 4 blocks per SM
 *     instead of 3 (64 registers).
 *
 * Why (dev/membound/README.md, session 13, helper h13c): a bf16 element is 4 bytes of traffic (x in,
 * y out), so at the 1 GiB copy's rate an SM must finish ~2.9 elements a cycle; the old kernels spent
 * ~24 (LayerNorm) / ~17 (RMSNorm) thread instructions per element, 7.5 of them the software pack:
 * bf16 ran at 0.73-0.84 of the copy where f32 (no pack, half the elements per byte) ran at 0.83-0.90
 * and the bf16 softmax (same kernel shape, hardware pack since session 6) at 0.85-0.99. Measured
 * (session 13, H100, `camel bench membound` in turns against the old kernels, 3 rounds): bf16 mode 2 /
 * old 1.05-1.17 on every shape (LayerNorm 256x262144 1.15-1.17, 4096x4096 1.08-1.10), geomean 1.076
 * steady; mode 2 / mode 1 1.005 (1.046-1.050 at LayerNorm 256x262144); f32 1.00.
 *
 * Bits: the same as mode 0 for every finite or infinite y (both round to nearest even, overflow to
 * inf, keep subnormals) and the same statistics code, so mean / rstd / y are bitwise today's; only a
 * NaN y (from a NaN or inf input) is the canonical NaN (0x7FFF) instead of the CPU's quiet NaN with
 * sign and payload, as the softmax, cross-entropy and norm backward outputs already are.
 *
 * CML_NORM_FWD_V2 (read once): 0 / 1 / 2 as above (for A/B runs); unset or anything else = 2.
 * f32 rows and the unaligned paths always run mode 0 (nothing to pack). Tests force a mode in-process
 * through cml__norm_fwd_v2_force (layernorm_fwd.cu) and read the launches of each mode's kernels; an
 * inline function's static is one object across the two translation units. */
#ifndef CML_KERNELS_CUDA_NORM_NORM_FWD_V2_CUH
#define CML_KERNELS_CUDA_NORM_NORM_FWD_V2_CUH

#include <stdlib.h>
#include <string.h>

inline int &nfv2_forced(void) {
    static int mode = -1; /* -1: the environment's */
    return mode;
}

/* Launches so far of the kernels of mode 1 and 2 (index = the kernel's MODE flag). */
inline unsigned long long *nfv2_launch_counts(void) {
    static unsigned long long n[3];
    return n;
}

/* The mode of a 16-bit forward launch. */
static inline int nfv2_mode(void) {
    static int env = -2;
    if (env == -2) {
        const char *e = getenv("CML_NORM_FWD_V2");
        env = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "1") == 0 ? 1 : 2;
    }
    const int f = nfv2_forced();
    return f >= 0 && f <= 2 ? f : env;
}

/* Mode 2's register rows: blocks of at most NFV2_OCC_THREADS threads, OCC of them per SM (LayerNorm 6
 * at 40 registers; RMSNorm 5 at 48: at 40 it spilled 12-20 bytes). NFV2_MINB(MODE, OCC, OLD): the
 * launch bounds' second argument for a kernel of MODE, OLD being the old kernel's (modes 0 and 1
 * keep the old bounds: 1024 threads). */
#define NFV2_OCC_THREADS 256
#define NFV2_THREADS(MODE) ((MODE) == 2 ? NFV2_OCC_THREADS : 1024)
#define NFV2_MINB(MODE, OCC, OLD) ((MODE) == 2 ? (OCC) : (OLD))

/* Counts one launch of a kernel of MODE (for the tests' proof that it ran). */
static inline void nfv2_count(int mode) { __atomic_fetch_add(&nfv2_launch_counts()[mode], 1ull, __ATOMIC_RELAXED); }

#endif
