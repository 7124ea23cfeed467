/* JSON-lines logs: one object per line, flushed as it is written so that a
 * run can be followed (and plotted) while it goes. */
#include <math.h>
#include <string.h>

#include "cli.h"

bool cli_json_open(cli_json *j, const char *path) {
    memset(j, 0, sizeof *j);
    if (!path) return true;
    j->f = fopen(path, "w");
    if (!j->f) {
        perror(path);
        fprintf(stderr, "hint: check that the directory of --log exists and is writable\n");
        return false;
    }
    return true;
}

/* Appends "key": value (value already JSON text). */
static void put(cli_json *j, const char *key, const char *value) {
    if (!j->f) return;
    size_t room = sizeof j->buf - j->len;
    int n = snprintf(j->buf + j->len, room, "%s\"%s\": %s", j->len > 1 ? ", " : "", key, value);
    if (n > 0 && (size_t)n < room) j->len += (size_t)n;
}

void cli_json_begin(cli_json *j, const char *event) {
    j->len = 0;
    if (!j->f) return;
    j->buf[j->len++] = '{';
    j->buf[j->len] = '\0';
    cli_json_str(j, "event", event);
}

void cli_json_str(cli_json *j, const char *key, const char *value) {
    char clean[512];
    size_t k = 0; /* keep the log valid JSON: drop quotes, backslashes and control characters */
    for (const char *p = value; *p && k + 1 < sizeof clean; p++)
        if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) clean[k++] = *p;
    clean[k] = '\0';
    char quoted[520];
    snprintf(quoted, sizeof quoted, "\"%s\"", clean);
    put(j, key, quoted);
}

void cli_json_num(cli_json *j, const char *key, double value) {
    char text[64] = "null";
    if (isfinite(value)) snprintf(text, sizeof text, "%.6g", value);
    put(j, key, text);
}

void cli_json_int(cli_json *j, const char *key, int64_t value) {
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)value);
    put(j, key, text);
}

void cli_json_end(cli_json *j) {
    if (!j->f) return;
    fprintf(j->f, "%s}\n", j->buf);
    fflush(j->f);
}

void cli_json_close(cli_json *j) {
    if (j->f) fclose(j->f);
    j->f = NULL;
}
