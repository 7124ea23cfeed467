#include <cblas.h>
#include <stdio.h>

#include "camel/camel.h"

const char *cml_version(void) { return CML_VERSION; }

const char *cml_build_info(void) {
    static char info[256];
    snprintf(info, sizeof info, "%s build, C11, OpenMP, OpenBLAS (CPU GEMM), zlib, CUDA backend %s%s",
             CML_BUILD_TYPE,
#ifdef CML_HAVE_CUDA
             "compiled in (sm_90a)",
#else
             "not compiled in",
#endif
#ifdef CML_SANITIZE
             ", ASan+UBSan"
#else
             ""
#endif
    );
    return info;
}

const char *cml_blas_info(void) {
    static char info[160];
    snprintf(info, sizeof info, "%s (core %s, %d threads)", openblas_get_config(), openblas_get_corename(),
             openblas_get_num_threads());
    return info;
}
