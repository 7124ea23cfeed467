/* camel: the FlamingCamel command-line tool. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "camel/camel.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "camel %s: deep learning in C11 with CUDA kernels for Hopper\n\n"
            "usage: camel <command> [options]\n\n"
            "commands:\n"
            "  info                 version, build options, BLAS, CPU threads, CUDA availability\n"
            "  train gpt            train a character-level GPT on Tiny Shakespeare (or any text file)\n"
            "  train cnn            train a CNN: LeNet-5 on MNIST, or a Conv-BN-ReLU network on CIFAR-10\n"
            "  train mlp            train a multilayer perceptron on MNIST or Fashion-MNIST\n"
            "  sample               generate text from a checkpoint of train gpt\n"
            "  bench matmul         CPU matmul GFLOP/s: camel vs calling OpenBLAS directly\n"
            "  bench membound       GPU memory-bound kernels: GB/s and fraction of the copy bandwidth\n"
            "  bench gemm           GPU GEMM TFLOP/s: cml_gemm vs cuBLAS/cuBLASLt on the same buffers\n"
            "  bench attention      GPU attention TFLOP/s (forward, forward+backward) and a constant-time check\n"
            "  tune gemm            GPU GEMM: time the Hopper path's tile configurations, write its tuned table\n\n"
            "Run `camel <command> --help` for the options of a command.\n",
            cml_version());
}

/* OpenMP threads spin while they wait by default. When other processes share the
 * cores, that made 2-thread training 5-7x slower than 1 thread on a 2-core machine,
 * while passive waiting cost nothing measurable on an idle one. libgomp reads the
 * policy once, when it is loaded, so the tool sets it and runs itself again. */
static void prefer_passive_openmp(char **argv) {
    if (getenv("OMP_WAIT_POLICY")) return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv); /* returns only on failure: then go on as we are */
}

int main(int argc, char **argv) {
    prefer_passive_openmp(argv);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("camel %s\n", cml_version());
        return 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0) return cmd_info(argc - 2, argv + 2);
    if (strcmp(cmd, "sample") == 0) return cmd_sample(argc - 2, argv + 2);
    if (strcmp(cmd, "tune") == 0) {
        const char *what = argc > 2 ? argv[2] : "";
        if (strcmp(what, "gemm") == 0) return cmd_tune_gemm(argc - 3, argv + 3);
        fprintf(stderr, "camel tune: unknown target \"%s\"; available: gemm\n", what);
        return 2;
    }
    if (strcmp(cmd, "train") == 0 || strcmp(cmd, "bench") == 0) {
        const char *what = argc > 2 ? argv[2] : "";
        if (strcmp(cmd, "train") == 0 && strcmp(what, "cnn") == 0) return cmd_train_cnn(argc - 3, argv + 3);
        if (strcmp(cmd, "train") == 0 && strcmp(what, "mlp") == 0) return cmd_train_mlp(argc - 3, argv + 3);
        if (strcmp(cmd, "train") == 0 && strcmp(what, "gpt") == 0) return cmd_train_gpt(argc - 3, argv + 3);
        if (strcmp(cmd, "bench") == 0 && strcmp(what, "matmul") == 0) return cmd_bench_matmul(argc - 3, argv + 3);
        if (strcmp(cmd, "bench") == 0 && strcmp(what, "membound") == 0) return cmd_bench_membound(argc - 3, argv + 3);
        if (strcmp(cmd, "bench") == 0 && strcmp(what, "gemm") == 0) return cmd_bench_gemm(argc - 3, argv + 3);
        if (strcmp(cmd, "bench") == 0 && strcmp(what, "attention") == 0) return cmd_bench_attention(argc - 3, argv + 3);
        fprintf(stderr, "camel %s: unknown %s \"%s\"; available: %s\n", cmd, strcmp(cmd, "train") == 0 ? "model" : "benchmark",
                what, strcmp(cmd, "train") == 0 ? "cnn, gpt, mlp" : "attention, gemm, matmul, membound");
        return 2;
    }
    fprintf(stderr, "camel: unknown command \"%s\"\n\n", cmd);
    usage(stderr);
    return 2;
}
