/* Printing tensors, NumPy style. */
#include <math.h>

#include "framework/tensor_impl.h"

enum { EDGE = 3, MAX_FULL = 8 }; /* dims longer than MAX_FULL show EDGE items at each end */

static void print_value(const cml_tensor *t, const int64_t *index, FILE *f) {
    double v = cml_tensor_item_at(t, index);
    if (!cml_dtype_is_float(t->dtype)) fprintf(f, "%lld", (long long)v);
    else if (isnan(v)) fprintf(f, "nan");
    else if (isinf(v)) fprintf(f, v > 0 ? "inf" : "-inf");
    else fprintf(f, "%.4g", v);
}

static void print_dim(const cml_tensor *t, int dim, int64_t *index, int indent, FILE *f) {
    if (t->ndim == 0) {
        print_value(t, index, f);
        return;
    }
    int64_t n = t->shape[dim];
    fputc('[', f);
    for (int64_t i = 0; i < n; i++) {
        if (n > MAX_FULL && i == EDGE) {
            fprintf(f, "...");
            i = n - EDGE - 1;
            if (dim == t->ndim - 1) fprintf(f, ", ");
            else fprintf(f, ",\n%*s", indent + 1, "");
            continue;
        }
        index[dim] = i;
        if (dim == t->ndim - 1) print_value(t, index, f);
        else print_dim(t, dim + 1, index, indent + 1, f);
        if (i + 1 < n) {
            if (dim == t->ndim - 1) fprintf(f, ", ");
            else fprintf(f, ",\n%*s", indent + 1, "");
        }
    }
    fputc(']', f);
}

void cml_tensor_print(const cml_tensor *t, FILE *f) {
    if (!t) {
        fprintf(f, "tensor(NULL)\n");
        return;
    }
    char desc[200];
    fprintf(f, "tensor(%s, %s", cml_tensor_describe(t, desc, sizeof desc), cml_device_name(t->storage->device));
    if (t->requires_grad) fprintf(f, ", requires_grad");
    fprintf(f, ")\n");
    if (t->storage->device.type != CML_CPU) {
        cml_tensor *h = cml_tensor_to(t, CML_DEVICE_CPU);
        if (!h) return;
        cml_tensor_print(h, f);
        cml_tensor_release(h);
        return;
    }
    int64_t index[CML_MAX_DIMS] = {0};
    print_dim(t, 0, index, 0, f);
    fputc('\n', f);
}
