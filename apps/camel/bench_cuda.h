/* Error checks shared by the CUDA benchmark tools (camel bench gemm / attention / membound,
 * camel tune gemm, bench/adamw.c). A failing CUDA or camel call there is a broken set-up, not
 * bad input to the library, so the tool names the call and the reason and exits. A file defines
 * BENCH_WHO (its command's name) and BENCH_HINT (what to ask for when memory runs out) before
 * including this. CUDA builds only. */
#ifndef CAMEL_BENCH_CUDA_H
#define CAMEL_BENCH_CUDA_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "camel/camel.h"

#define BENCH_CUDA_OK(call)                                                                                     \
    do {                                                                                                        \
        cudaError_t e_ = (call);                                                                                \
        if (e_ != cudaSuccess) {                                                                                \
            fprintf(stderr, "%s: %s failed: %s\n", BENCH_WHO, #call, cudaGetErrorString(e_));                   \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)

#define BENCH_CML_OK(call)                                                                                      \
    do {                                                                                                        \
        if ((call) != CML_OK) {                                                                                 \
            fprintf(stderr, "%s: %s failed: %s\n", BENCH_WHO, #call, cml_last_error());                         \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)

/* n bytes of device memory (at least 1), or the size that failed and BENCH_HINT, then exit. */
static inline void *bench_dmalloc(size_t n) {
    void *p = NULL;
    const cudaError_t e = cudaMalloc(&p, n ? n : 1);
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: cudaMalloc of %.2f GiB failed: %s\nhint: %s\n", BENCH_WHO, (double)n / (1 << 30),
                cudaGetErrorString(e), BENCH_HINT);
        exit(1);
    }
    return p;
}

#endif
