#include <stdarg.h>
#include <stdio.h>

#include "runtime/error.h"

static _Thread_local char last_message[1024];
static _Thread_local cml_status last_status = CML_OK;

cml_status cml__error(cml_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    last_status = s;
    return s;
}

const char *cml_last_error(void) { return last_message; }
cml_status cml_last_status(void) { return last_status; }

void cml_clear_error(void) {
    last_message[0] = '\0';
    last_status = CML_OK;
}

const char *cml_status_name(cml_status s) {
    switch (s) {
    case CML_OK: return "CML_OK";
    case CML_ERR_INVALID_ARG: return "CML_ERR_INVALID_ARG";
    case CML_ERR_SHAPE: return "CML_ERR_SHAPE";
    case CML_ERR_DTYPE: return "CML_ERR_DTYPE";
    case CML_ERR_UNSUPPORTED: return "CML_ERR_UNSUPPORTED";
    case CML_ERR_OOM: return "CML_ERR_OOM";
    case CML_ERR_CUDA: return "CML_ERR_CUDA";
    case CML_ERR_IO: return "CML_ERR_IO";
    case CML_ERR_CORRUPT: return "CML_ERR_CORRUPT";
    case CML_ERR_STATE: return "CML_ERR_STATE";
    case CML_ERR_INTERNAL: return "CML_ERR_INTERNAL";
    }
    return "CML_ERR_UNKNOWN";
}
