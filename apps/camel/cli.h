/* Shared pieces of the camel command-line tool: flag parsing, progress bars,
 * JSON-lines logs, and the subcommand entry points. */
#ifndef CAMEL_CLI_H
#define CAMEL_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- flags --------------------------------------------------------------- */

typedef enum cli_kind { CLI_INT, CLI_FLOAT, CLI_STRING, CLI_BOOL } cli_kind;

typedef struct cli_flag {
    const char *name; /* "epochs" for --epochs */
    cli_kind kind;
    void *value;      /* int64_t*, double*, const char**, bool* */
    const char *help;
} cli_flag;

/* Parses argv (after the subcommand words) into the flags. Returns 0 to go on,
 * 1 when --help was printed, 2 on a bad flag (the message and a hint are
 * printed to stderr). `usage` is the first help line, `about` a paragraph. */
int cli_parse(int argc, char **argv, const cli_flag *flags, int n, const char *usage, const char *about);

/* Prints the library's last error and a hint, returns 1 (the exit code). */
int cli_fail(const char *what, const char *hint);

double cli_now(void); /* monotonic seconds */

/* ---- progress bar -------------------------------------------------------- */

typedef struct cli_progress {
    const char *label;
    int64_t total;
    const char *unit; /* "samples", "tokens" */
    double start, last_draw;
    bool tty;
} cli_progress;

void cli_progress_start(cli_progress *p, const char *label, int64_t total, const char *unit);
/* Redraws (at most ~10 times a second on a terminal) with throughput, ETA and an optional metric. */
void cli_progress_update(cli_progress *p, int64_t done, const char *metric_name, double metric);
void cli_progress_finish(cli_progress *p);

/* ---- JSON-lines logs ------------------------------------------------------- */

typedef struct cli_json {
    FILE *f;
    char buf[4096];
    size_t len;
} cli_json;

/* Opens (truncates) path; NULL path means no log. Returns false with a message printed on failure. */
bool cli_json_open(cli_json *j, const char *path);
void cli_json_begin(cli_json *j, const char *event);
void cli_json_str(cli_json *j, const char *key, const char *value);
void cli_json_num(cli_json *j, const char *key, double value);
void cli_json_int(cli_json *j, const char *key, int64_t value);
void cli_json_end(cli_json *j); /* writes the record as one line and flushes */
void cli_json_close(cli_json *j);

/* ---- subcommands ------------------------------------------------------------ */

int cmd_info(int argc, char **argv);
int cmd_train_mlp(int argc, char **argv);
int cmd_train_cnn(int argc, char **argv);
int cmd_bench_matmul(int argc, char **argv);
int cmd_bench_membound(int argc, char **argv);
int cmd_bench_gemm(int argc, char **argv);
int cmd_tune_gemm(int argc, char **argv);
int cmd_bench_attention(int argc, char **argv);
int cmd_train_gpt(int argc, char **argv);
int cmd_sample(int argc, char **argv);

/* Reads the GPT config, vocabulary, dropout generator state (dropout_rng may be NULL)
 * and step saved in the metadata of a `camel train gpt` checkpoint directory;
 * prints a message and returns non-zero on failure (cmd_train_gpt.c). */
struct cml_gpt_config;
struct cml_char_vocab;
struct cml_rng;
int gpt_checkpoint_read_meta(const char *dir, struct cml_gpt_config *cfg, struct cml_char_vocab *vocab,
                             struct cml_rng *dropout_rng, int64_t *step);

#endif
