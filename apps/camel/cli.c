/* Flag parsing and error reporting for the camel tool. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "camel/camel.h"
#include "cli.h"

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *kind_hint(cli_kind k) {
    switch (k) {
    case CLI_INT: return "N";
    case CLI_FLOAT: return "X";
    case CLI_STRING: return "TEXT";
    case CLI_BOOL: return "";
    }
    return "";
}

static void print_help(const cli_flag *flags, int n, const char *usage, const char *about) {
    printf("usage: %s\n\n%s\n\noptions:\n", usage, about);
    for (int i = 0; i < n; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s %s", flags[i].name, kind_hint(flags[i].kind));
        printf("  %-24s %s", left, flags[i].help);
        switch (flags[i].kind) {
        case CLI_INT: printf(" (default %lld)", (long long)*(int64_t *)flags[i].value); break;
        case CLI_FLOAT: printf(" (default %g)", *(double *)flags[i].value); break;
        case CLI_STRING:
            if (*(const char **)flags[i].value) printf(" (default %s)", *(const char **)flags[i].value);
            break;
        case CLI_BOOL: break;
        }
        printf("\n");
    }
    printf("  %-24s %s\n", "--help", "show this help");
}

static int set_value(const cli_flag *f, const char *text) {
    char *end = NULL;
    errno = 0;
    switch (f->kind) {
    case CLI_INT: {
        long long v = strtoll(text, &end, 10);
        if (errno || end == text || *end) {
            fprintf(stderr, "camel: --%s expects an integer, got \"%s\"\n", f->name, text);
            return 2;
        }
        *(int64_t *)f->value = v;
        return 0;
    }
    case CLI_FLOAT: {
        double v = strtod(text, &end);
        if (errno || end == text || *end || !isfinite(v)) {
            fprintf(stderr, "camel: --%s expects a number, got \"%s\"\n", f->name, text);
            return 2;
        }
        *(double *)f->value = v;
        return 0;
    }
    case CLI_STRING: *(const char **)f->value = text; return 0;
    case CLI_BOOL: *(bool *)f->value = true; return 0;
    }
    return 2;
}

int cli_parse(int argc, char **argv, const cli_flag *flags, int n, const char *usage, const char *about) {
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_help(flags, n, usage, about);
            return 1;
        }
        if (strncmp(arg, "--", 2) != 0) {
            fprintf(stderr, "camel: unexpected argument \"%s\"\nusage: %s\nRun with --help for the options.\n", arg,
                    usage);
            return 2;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const cli_flag *f = NULL;
        for (int k = 0; k < n && !f; k++)
            if (strlen(flags[k].name) == len && strncmp(flags[k].name, name, len) == 0) f = &flags[k];
        if (!f) {
            fprintf(stderr, "camel: unknown option \"%s\"\nusage: %s\nRun with --help for the options.\n", arg, usage);
            return 2;
        }
        const char *value = NULL;
        if (f->kind == CLI_BOOL) {
            if (eq) {
                fprintf(stderr, "camel: --%s takes no value\n", f->name);
                return 2;
            }
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            fprintf(stderr, "camel: --%s needs a value (%s)\n", f->name, f->help);
            return 2;
        }
        int rc = set_value(f, value);
        if (rc) return rc;
    }
    return 0;
}

int cli_fail(const char *what, const char *hint) {
    fprintf(stderr, "camel: %s: %s\n", what, cml_last_error());
    if (hint) fprintf(stderr, "hint: %s\n", hint);
    return 1;
}
