/* camel info: what this build is and what it can use. */
#include <stdio.h>

#include "camel/camel.h"
#include "cli.h"

int cmd_info(int argc, char **argv) {
    int rc = cli_parse(argc, argv, NULL, 0, "camel info",
                       "Prints the version, build options, the CPU BLAS in use, CPU threads and whether CUDA "
                       "devices can be used (and why not).");
    if (rc) return rc == 1 ? 0 : rc;
    printf("camel %s\n", cml_version());
    printf("build:        %s\n", cml_build_info());
    printf("BLAS:         %s\n", cml_blas_info());
    printf("CPU threads:  %d (set OMP_NUM_THREADS or --threads to change)\n", cml_cpu_threads());
    const char *why = NULL;
    if (cml_cuda_available(&why)) printf("CUDA:         available, %d device(s)\n", cml_cuda_device_count());
    else printf("CUDA:         not available: %s\n", why);
    return 0;
}
