/* Internal: the context struct. */
#ifndef CML_RUNTIME_CTX_IMPL_H
#define CML_RUNTIME_CTX_IMPL_H

#include "camel/runtime.h"

struct cml_ctx {
    cml_device device;
    void *stream; /* cudaStream_t on CUDA, NULL on the CPU */
    const cml_allocator *alloc;
    void *workspace;
    size_t workspace_size;
};

#endif
