/* Internal: the context struct and helpers the framework uses to find a device's stream. */
#ifndef CML_RUNTIME_CTX_IMPL_H
#define CML_RUNTIME_CTX_IMPL_H

#include "camel/runtime.h"

struct cml_ctx {
    cml_device device;
    void *stream; /* cudaStream_t on CUDA, NULL on the CPU */
    const cml_allocator *alloc;
    void *workspace;
    size_t workspace_size;
    void *zeroed; /* CUDA: device words that each kernel using them leaves 0 when it ends (the arrival
                     counters of split reductions and split-K GEMMs; cml__cuda_zeroed): set to 0 once
                     when allocated, never memset per call; NULL until first needed. Safe because a
                     context's kernels run one at a time on its one stream (no two launches share them) */
    size_t zeroed_size;
    struct cml__index_errors *index_errors; /* CUDA: bad indices found on the device, reported at the next wait
                                               (runtime/cuda_index_check.c); NULL on the CPU */
};

#ifdef __cplusplus
extern "C" {
#endif

/* The default context of d if it exists now, else NULL; never creates one
 * (so it is safe while the default contexts are being destroyed at exit). */
cml_ctx *cml__ctx_default_existing(cml_device d);

#ifdef __cplusplus
}
#endif

#endif
