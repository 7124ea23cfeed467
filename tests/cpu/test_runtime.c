#include "harness.h"

static void test_device_parse(void) {
    cml_device d;
    CHECK_OK(cml_device_parse("cpu", &d));
    CHECK(d.type == CML_CPU);
    CHECK_OK(cml_device_parse("cuda:3", &d));
    CHECK(d.type == CML_CUDA && d.index == 3);
    CHECK_STATUS(cml_device_parse("tpu", &d), CML_ERR_INVALID_ARG, "unknown device \"tpu\"");
    CHECK_STATUS(cml_device_parse("cuda:x", &d), CML_ERR_INVALID_ARG, "cuda:N");
}

static void test_ctx_workspace(void) {
    cml_ctx *ctx = NULL;
    CHECK_OK(cml_ctx_create(&ctx, CML_DEVICE_CPU));
    void *p = NULL;
    CHECK_OK(cml_ctx_workspace(ctx, &p, 1000));
    CHECK(p != NULL && ((uintptr_t)p % 64) == 0);
    memset(p, 1, 1000);
    CHECK_OK(cml_ctx_workspace(ctx, &p, 100000));
    memset(p, 2, 100000);
    CHECK(cml_ctx_stream(ctx) == NULL); /* a CPU context has no stream */
    cml_ctx_destroy(ctx);
    CHECK(cml_ctx_stream(NULL) == NULL);
    CHECK_STATUS(cml_ctx_create(NULL, CML_DEVICE_CPU), CML_ERR_INVALID_ARG, "out must not be NULL");
}

static void test_cuda_reason(void) {
    const char *why = NULL;
    if (!cml_cuda_available(&why)) {
        CHECK(why != NULL && strlen(why) > 10);
        cml_ctx *ctx = NULL;
        cml_device d = {CML_CUDA, 0};
        CHECK(cml_ctx_create(&ctx, d) != CML_OK);
        CHECK(strstr(cml_last_error(), "cuda:0") != NULL);
    }
}

int main(void) {
    RUN(test_device_parse);
    RUN(test_ctx_workspace);
    RUN(test_cuda_reason);
    return th_finish();
}
