/* Internal: the Hopper (sm_90a) attention forward path (attention_fwd_sm90.cu), for the CUDA
 * dispatch (attention_cuda.cu), tests and benchmarks. Plain C. */
#ifndef CML_KERNELS_CUDA_ATTENTION_ATTENTION_SM90_H
#define CML_KERNELS_CUDA_ATTENTION_ATTENTION_SM90_H

#include <stdbool.h>

#include "camel/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the wgmma/TMA forward takes a problem: an sm_90 device, f16/bf16, D = 64, 128 or 256,
 * S_q, S_kv >= 1, scale > 0, every stride a multiple of 8 elements (16 bytes) and every pointer
 * 16-byte aligned (TMA's rules). Everything else stays on the mma.sync / SIMT paths. */
bool cml__attention_fwd_sm90_takes(const cml_ctx *ctx, const cml_attention_desc *desc, const void *O, const void *Q,
                                   const void *K, const void *V);

/* Runs the forward on the sm90 path. *taken = false (and nothing launched, CML_OK) when the path
 * does not take the problem; a tensor map the driver refuses is an error (CML_ERR_CUDA). */
cml_status cml__attention_fwd_sm90(cml_ctx *ctx, const cml_attention_desc *desc, void *O, float *lse, const void *Q,
                                   const void *K, const void *V, bool *taken);

/* Launches of the sm90 forward so far in this process (tests: which path ran). */
long long cml__attention_fwd_sm90_runs(void);
/* Of those, launches of the D = 64 kernel whose query tiles end at S_q (QSHIFT; tests). */
long long cml__attention_fwd_sm90_qshift_runs(void);
/* The rows the sm90 forward shifts its query tiles by for a problem it takes (causal D = 64, S_q % 192 == 64
 * and S_q < 2048 by default; CML_ATT_FWD_QSHIFT=0 / 1 in the environment, read once: never / wherever
 * S_q % 64 == 0 and S_q % 192 != 0); 0: the unshifted kernel. Tests predict the QSHIFT launches with it. */
int cml__attention_fwd_sm90_q_shift(const cml_attention_desc *desc);
/* Launches of the D = 256 kernel with the PRO prologue (Q in per-consumer halves; tests). */
long long cml__attention_fwd_sm90_d256pro_runs(void);
/* Whether the sm90 forward runs a D = 256 problem it takes with the PRO prologue (causal with S_kv <= 512 by
 * default; CML_ATT_FWD_D256PRO=0 / 1 in the environment, read once: never / every D = 256 problem). */
bool cml__attention_fwd_sm90_d256pro(const cml_attention_desc *desc);
/* Whether the sm90 forward runs a D = 256 problem with 128-key tiles (one stage, no intra-warpgroup overlap,
 * HALF) rather than 80-key ones (two stages, overlap): causal with S_kv <= 4096 and full with S_kv <= 512 by
 * default; CML_ATT_FWD_D256K128=0 / 1 in the environment, read once: never / every D = 256 problem. */
bool cml__attention_fwd_sm90_d256k128(const cml_attention_desc *desc);

/* Whether the wgmma/TMA backward (attention_bwd_sm90.cu) takes a problem: an sm_90 device,
 * f16/bf16, D = 64, 128 or 256, fixed lengths, finite scale, the forward's TMA rules for Q, K, V,
 * O, dO and also for dQ, dK, dV (laid out like Q, K, V). The rest stays on mma / SIMT. */
bool cml__attention_bwd_sm90_takes(const cml_ctx *ctx, const cml_attention_desc *desc, const void *dQ, const void *dK,
                                   const void *dV, const void *dO, const void *Q, const void *K, const void *V,
                                   const void *O);

/* Runs the backward on the sm90 path (as cml__attention_fwd_sm90: *taken = false and CML_OK
 * when it does not take the problem). Deterministic; uses the context's workspace. */
cml_status cml__attention_bwd_sm90(cml_ctx *ctx, const cml_attention_desc *desc, void *dQ, void *dK, void *dV,
                                   const void *dO, const void *Q, const void *K, const void *V, const void *O,
                                   const float *lse, bool *taken);

/* Launches of the sm90 backward so far in this process (tests: which path ran). */
long long cml__attention_bwd_sm90_runs(void);
/* Main-kernel launches that claimed key blocks longest first (causal, cooperative; attention_bwd_sm90.cu). */
long long cml__attention_bwd_sm90_asc_runs(void);

/* "sm90", "mma" or "simt": the backward path cml_attention_bwd takes on CUDA (tests, benchmarks). */
const char *cml__attention_bwd_cuda_path_name(const cml_ctx *ctx, const cml_attention_desc *desc, const void *dQ,
                                              const void *dK, const void *dV, const void *dO, const void *Q,
                                              const void *K, const void *V, const void *O);

/* "sm90", "mma" or "simt": the forward path cml_attention_fwd takes on CUDA (tests, benchmarks). */
const char *cml__attention_fwd_cuda_path_name(const cml_ctx *ctx, const cml_attention_desc *desc, const void *O,
                                              const void *Q, const void *K, const void *V);

#ifdef __cplusplus
}
#endif
#endif
