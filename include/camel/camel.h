/* FlamingCamel: the umbrella header. */
#ifndef CAMEL_CAMEL_H
#define CAMEL_CAMEL_H

#include "camel/status.h"
#include "camel/dtype.h"
#include "camel/runtime.h"
#include "camel/kernels.h"
#include "camel/tensor.h"
#include "camel/autograd.h"
#include "camel/ops.h"
#include "camel/nn.h"
#include "camel/optim.h"
#include "camel/data.h"
#include "camel/io.h"
#include "camel/gpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "0.1.0" */
const char *cml_version(void);
/* A one-line description of build options ("Release, CUDA on (sm_90a), OpenBLAS 0.3.21, OpenMP"). */
const char *cml_build_info(void);

/* The CPU BLAS in use ("OpenBLAS 0.3.21 DYNAMIC_ARCH ... (core Haswell, 2 threads)"). */
const char *cml_blas_info(void);

#ifdef __cplusplus
}
#endif
#endif
