/* Device names and CUDA availability. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "camel/runtime.h"

#ifdef CML_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

const char *cml_device_name(cml_device d) {
    static _Thread_local char buf[32];
    if (d.type == CML_CPU) return "cpu";
    snprintf(buf, sizeof buf, "cuda:%d", d.index);
    return buf;
}

bool cml_device_equal(cml_device a, cml_device b) { return a.type == b.type && a.index == b.index; }

cml_status cml_device_parse(const char *text, cml_device *out) {
    CML_CHECK_ARG(text && out, "cml_device_parse: text and out must not be NULL");
    if (strcmp(text, "cpu") == 0) {
        *out = CML_DEVICE_CPU;
        return CML_OK;
    }
    if (strncmp(text, "cuda", 4) == 0) {
        const char *rest = text + 4;
        int index = 0;
        if (*rest == ':') {
            char *end = NULL;
            long v = strtol(rest + 1, &end, 10);
            if (end == rest + 1 || *end != '\0' || v < 0 || v > 1024)
                return cml__error(CML_ERR_INVALID_ARG,
                                  "cml_device_parse: bad device \"%s\": expected cuda:N with N >= 0", text);
            index = (int)v;
        } else if (*rest != '\0') {
            return cml__error(CML_ERR_INVALID_ARG,
                              "cml_device_parse: unknown device \"%s\": expected cpu, cuda or cuda:N", text);
        }
        *out = (cml_device){CML_CUDA, index};
        return CML_OK;
    }
    return cml__error(CML_ERR_INVALID_ARG,
                      "cml_device_parse: unknown device \"%s\": expected cpu, cuda or cuda:N", text);
}

int cml_cuda_device_count(void) {
#ifdef CML_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
#else
    return 0;
#endif
}

bool cml_cuda_available(const char **reason) {
#ifdef CML_HAVE_CUDA
    static _Thread_local char why[256];
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, sizeof why, "no usable CUDA driver or device (cudaGetDeviceCount: %s)",
                 cudaGetErrorString(e));
        if (reason) *reason = why;
        return false;
    }
    if (n == 0) {
        if (reason) *reason = "the CUDA driver reports no devices";
        return false;
    }
    if (reason) *reason = NULL;
    return true;
#else
    if (reason) *reason = "this build of camel has no CUDA backend (nvcc was not found at configure time)";
    return false;
#endif
}
