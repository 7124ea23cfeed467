/* The built-in CPU allocator (64-byte aligned, with usage statistics) and the
 * per-device default-allocator registry that a CUDA caching allocator plugs into. */
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime/error.h"
#include "camel/runtime.h"

static atomic_size_t cpu_in_use;
static atomic_size_t cpu_peak;

static cml_status cpu_alloc(void *state, void **ptr, size_t nbytes, void *stream) {
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (rounded == 0) rounded = 64;
    void *p = aligned_alloc(64, rounded);
    if (!p) return cml__error(CML_ERR_OOM, "out of host memory allocating %zu bytes", nbytes);
    *ptr = p;
    size_t now = atomic_fetch_add(&cpu_in_use, nbytes) + nbytes;
    size_t peak = atomic_load(&cpu_peak);
    while (now > peak && !atomic_compare_exchange_weak(&cpu_peak, &peak, now)) {}
    return CML_OK;
}

static void cpu_free(void *state, void *ptr, size_t nbytes, void *stream) {
    if (!ptr) return;
    atomic_fetch_sub(&cpu_in_use, nbytes);
    free(ptr);
}

static const cml_allocator cpu_allocator = {"cpu", {CML_CPU, 0}, NULL, cpu_alloc, cpu_free};
static const cml_allocator *cpu_default = &cpu_allocator;
static const cml_allocator *cuda_default; /* set by the CUDA backend */

const cml_allocator *cml_allocator_default(cml_device d) {
    return d.type == CML_CPU ? cpu_default : cuda_default;
}

void cml_allocator_set_default(cml_device d, const cml_allocator *a) {
    if (d.type == CML_CPU) cpu_default = a ? a : &cpu_allocator;
    else cuda_default = a;
}

size_t cml_cpu_bytes_in_use(void) { return atomic_load(&cpu_in_use); }
size_t cml_cpu_bytes_peak(void) { return atomic_load(&cpu_peak); }
