/* CPU cross-entropy straight from logits (rows, classes), never materializing
 * probabilities: loss = logsumexp(row) - row[target], computed with the max
 * subtracted and the sum in double. Targets are checked before any output is
 * written, so a bad target leaves the outputs untouched.
 *
 * A -inf logit is a class with probability 0 (a mask). A row whose target's
 * logit is -inf has loss +inf and the usual gradient (-dloss at the target).
 * A row whose logits are all -inf has no class with any probability: its loss
 * is +inf (not the NaN of -inf - -inf), and softmax over it is taken as all 0
 * (as attention does for a row that sees no key), so its gradient is -dloss at
 * the target and 0 elsewhere. NaN logits give NaN. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"
#include "runtime/error.h"

#define ROW_CHUNK 1024

static cml_status check_targets(const char *fn, const int64_t *targets, int64_t rows, int64_t classes,
                                int64_t ignore_index) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = targets[r];
        if (t != ignore_index && (t < 0 || t >= classes))
            return cml__error(CML_ERR_INVALID_ARG,
                              "%s: targets[%lld]=%lld must be in [0, %lld) or equal ignore_index=%lld", fn,
                              (long long)r, (long long)t, (long long)classes, (long long)ignore_index);
    }
    return CML_OK;
}

/* The row's max and log(sum(exp(x - max))). */
static void row_logsumexp(const void *logits, cml_dtype dtype, int64_t base, int64_t classes, float *max_out,
                          float *log_sum_out) {
    float buf[ROW_CHUNK];
    float m = -INFINITY;
    for (int64_t j0 = 0; j0 < classes; j0 += ROW_CHUNK) {
        int64_t len = classes - j0 < ROW_CHUNK ? classes - j0 : ROW_CHUNK;
        const float *x = cml__f32_view(buf, logits, dtype, base + j0, 1, len);
        for (int64_t j = 0; j < len; j++) m = (m != m || x[j] <= m) ? m : x[j]; /* NaN sticks */
    }
    if (m == -INFINITY) { /* every logit -inf: the callers handle the row (exp(-inf - -inf) is NaN) */
        *max_out = m;
        *log_sum_out = -INFINITY;
        return;
    }
    double sum = 0;
    for (int64_t j0 = 0; j0 < classes; j0 += ROW_CHUNK) {
        int64_t len = classes - j0 < ROW_CHUNK ? classes - j0 : ROW_CHUNK;
        const float *x = cml__f32_view(buf, logits, dtype, base + j0, 1, len);
        for (int64_t j = 0; j < len; j++) sum += (double)expf(x[j] - m);
    }
    *max_out = m;
    *log_sum_out = (float)log(sum);
}

static bool parallel_for(int64_t rows, int64_t classes) { return rows > 1 && rows * classes >= CML__PARALLEL_MIN; }

cml_status cml__cross_entropy_fwd_cpu(cml_ctx *ctx, float *loss, float *lse, const void *logits,
                                      const int64_t *targets, int64_t rows, int64_t classes,
                                      cml_dtype dtype, int64_t ignore_index) {
    CML_TRY(check_targets("cml_cross_entropy_fwd", targets, rows, classes, ignore_index));
#pragma omp parallel for schedule(static) if (parallel_for(rows, classes))
    for (int64_t r = 0; r < rows; r++) {
        if (targets[r] == ignore_index) {
            loss[r] = 0.0f;
            if (lse) lse[2 * r] = lse[2 * r + 1] = NAN;
            continue;
        }
        float m, log_sum;
        row_logsumexp(logits, dtype, r * classes, classes, &m, &log_sum);
        float x_t = cml_dtype_load(logits, dtype, r * classes + targets[r]);
        loss[r] = m == -INFINITY ? INFINITY : (m - x_t) + log_sum; /* all -inf: +inf, not -inf - -inf */
        if (lse) { /* the logsumexp as (max, log-sum): its bits survive large logits */
            lse[2 * r] = m;
            lse[2 * r + 1] = m == -INFINITY ? 0.0f : log_sum;
        }
    }
    return CML_OK;
}

cml_status cml__cross_entropy_bwd_cpu(cml_ctx *ctx, void *dlogits, const float *dloss,
                                      const void *logits, const float *lse, const int64_t *targets,
                                      int64_t rows, int64_t classes, cml_dtype dtype, int64_t ignore_index) {
    CML_TRY(check_targets("cml_cross_entropy_bwd", targets, rows, classes, ignore_index));
#pragma omp parallel for schedule(static) if (parallel_for(rows, classes))
    for (int64_t r = 0; r < rows; r++) {
        float in_buf[ROW_CHUNK], out_buf[ROW_CHUNK];
        int64_t base = r * classes, t = targets[r];
        bool ignored = t == ignore_index;
        float m = 0, log_sum = 0;
        if (!ignored && lse) m = lse[2 * r], log_sum = lse[2 * r + 1]; /* the forward's */
        else if (!ignored) row_logsumexp(logits, dtype, base, classes, &m, &log_sum);
        const bool empty = !ignored && m == -INFINITY; /* every logit -inf: softmax taken as all 0 */
        float g = ignored ? 0.0f : dloss[r];
        for (int64_t j0 = 0; j0 < classes; j0 += ROW_CHUNK) {
            int64_t len = classes - j0 < ROW_CHUNK ? classes - j0 : ROW_CHUNK;
            float *dx = dtype == CML_F32 ? (float *)dlogits + base + j0 : out_buf;
            if (ignored || empty) {
                for (int64_t j = 0; j < len; j++) dx[j] = 0.0f;
                if (empty && t >= j0 && t < j0 + len) dx[t - j0] = -g; /* the one-hot term alone */
            } else {
                const float *x = cml__f32_view(in_buf, logits, dtype, base + j0, 1, len);
                for (int64_t j = 0; j < len; j++) dx[j] = g * expf(x[j] - m - log_sum);
                if (t >= j0 && t < j0 + len) dx[t - j0] -= g; /* the one-hot term */
            }
            if (dx == out_buf) cml__store_f32(dlogits, dtype, base + j0, 1, dx, len);
        }
    }
    return CML_OK;
}
