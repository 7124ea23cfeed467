/* The built-in CPU allocator (64-byte aligned, with usage statistics) and the
 * per-device default-allocator registry. A CUDA device's default is the
 * built-in caching pool allocator (cuda_alloc.c) unless one was set. */
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime/cuda_backend.h"
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
static const cml_allocator *cuda_override[CML__MAX_CUDA_DEVICES]; /* set with cml_allocator_set_default */

const cml_allocator *cml_allocator_default(cml_device d) {
    if (d.type == CML_CPU) return cpu_default;
    if (d.type != CML_CUDA || d.index < 0 || d.index >= CML__MAX_CUDA_DEVICES) return NULL;
    if (cuda_override[d.index]) return cuda_override[d.index];
    return cml__cuda_allocator(d.index); /* NULL, with the error set, when the device is unusable */
}

void cml_allocator_set_default(cml_device d, const cml_allocator *a) {
    if (d.type == CML_CPU) cpu_default = a ? a : &cpu_allocator;
    else if (d.type == CML_CUDA && d.index >= 0 && d.index < CML__MAX_CUDA_DEVICES) cuda_override[d.index] = a;
}

size_t cml_cpu_bytes_in_use(void) { return atomic_load(&cpu_in_use); }
size_t cml_cpu_bytes_peak(void) { return atomic_load(&cpu_peak); }
