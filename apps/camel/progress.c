/* A one-line progress bar: on a terminal redrawn in place, otherwise a line
 * every 10% so that logs stay short. */
#include <stdio.h>
#include <unistd.h>

#include "cli.h"

void cli_progress_start(cli_progress *p, const char *label, int64_t total, const char *unit) {
    p->label = label;
    p->total = total > 0 ? total : 1;
    p->unit = unit;
    p->start = cli_now();
    p->last_draw = -1;
    p->tty = isatty(fileno(stderr));
}

static void format_eta(double s, char *buf, size_t n) {
    if (s < 0 || s > 360000) snprintf(buf, n, "--:--");
    else if (s >= 3600) snprintf(buf, n, "%d:%02d:%02d", (int)s / 3600, ((int)s / 60) % 60, (int)s % 60);
    else snprintf(buf, n, "%02d:%02d", (int)s / 60, (int)s % 60);
}

void cli_progress_update(cli_progress *p, int64_t done, const char *metric_name, double metric) {
    double now = cli_now(), elapsed = now - p->start;
    if (p->tty) {
        if (done < p->total && now - p->last_draw < 0.1) return;
    } else {
        int64_t step = p->total / 10 > 0 ? p->total / 10 : 1;
        int64_t prev = p->last_draw < 0 ? -1 : (int64_t)p->last_draw;
        if (done / step == prev && done < p->total) return;
    }
    double rate = elapsed > 0 ? (double)done / elapsed : 0;
    char eta[32];
    format_eta(rate > 0 ? (double)(p->total - done) / rate : -1, eta, sizeof eta);
    int width = 24, filled = (int)(width * (double)done / (double)p->total);
    char bar[32];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "%s%s [%s] %3.0f%% %.0f %s/s", p->tty ? "\r" : "", p->label, bar,
            100.0 * (double)done / (double)p->total, rate, p->unit);
    if (metric_name) fprintf(stderr, " %s %.4f", metric_name, metric);
    fprintf(stderr, " ETA %s%s", eta, p->tty ? "\033[K" : "\n");
    fflush(stderr);
    if (p->tty) p->last_draw = now;
    else p->last_draw = (double)(done / (p->total / 10 > 0 ? p->total / 10 : 1));
}

void cli_progress_finish(cli_progress *p) {
    if (p->tty) fprintf(stderr, "\r\033[K");
    fflush(stderr);
}
