/* Internal: helpers for module implementations. */
#ifndef CML_FRAMEWORK_NN_IMPL_H
#define CML_FRAMEWORK_NN_IMPL_H

#include <stddef.h>

#include "camel/nn.h"

/* A zeroed module struct of `size` bytes (a struct that embeds cml_module first),
 * in training mode, or NULL with CML_ERR_OOM naming `who`. */
cml_module *cml__module_alloc(size_t size, const cml_module_ops *ops, const char *who);

#endif
