/* Atomic file writes: a temporary file in the destination's directory, fsync,
 * rename over the destination, fsync of the directory. A crash or a failure
 * leaves either the previous file or the new one, never a torn one; on failure
 * the temporary file is removed. */
#define _POSIX_C_SOURCE 200809L /* fileno, fsync, getpid, open, strdup */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "framework/io/io_impl.h"
#include "runtime/error.h"

static cml_status io_error(const cml__atomic_file *f, const char *what, const char *path, int err) {
    return cml__error(CML_ERR_IO, "%s: cannot %s \"%s\": %s", f->who, what, path, strerror(err));
}

cml_status cml__atomic_begin(cml__atomic_file *f, const char *who, const char *path) {
    memset(f, 0, sizeof *f);
    f->who = who;
    size_t n = strlen(path);
    f->path = malloc(n + 1);
    f->tmp = malloc(n + 32);
    if (!f->path || !f->tmp) {
        cml__atomic_abort(f);
        return cml__error(CML_ERR_OOM, "%s: out of memory for the path \"%s\"", who, path);
    }
    memcpy(f->path, path, n + 1);
    snprintf(f->tmp, n + 32, "%s.tmp.%ld", path, (long)getpid());
    errno = 0;
    f->fp = fopen(f->tmp, "wb");
    if (!f->fp) {
        int e = errno;
        cml_status s = cml__error(CML_ERR_IO, "%s: cannot write \"%s\" (creating the temporary file \"%s\"): %s", who,
                                  path, f->tmp, strerror(e));
        free(f->path);
        free(f->tmp);
        f->path = f->tmp = NULL;
        return s;
    }
    return CML_OK;
}

void cml__atomic_write(cml__atomic_file *f, const void *data, size_t n) {
    if (f->failed || !f->fp || n == 0) return;
    errno = 0;
    if (fwrite(data, 1, n, f->fp) != n) {
        f->failed = true;
        f->error = errno ? errno : EIO;
    }
}

cml_status cml__atomic_finish(cml__atomic_file *f) {
    if (!f->fp) return cml__error(CML_ERR_INTERNAL, "%s: internal error: \"%s\" is not open", f->who, f->path);
    int err = f->failed ? f->error : 0;
    errno = 0;
    if (!err && fflush(f->fp) != 0) err = errno ? errno : EIO;
    if (!err && fsync(fileno(f->fp)) != 0) err = errno;
    errno = 0;
    if (fclose(f->fp) != 0 && !err) err = errno ? errno : EIO;
    f->fp = NULL;
    if (err) {
        f->failed = true;
        return io_error(f, "write", f->path, err);
    }
    return CML_OK;
}

/* fsync of the directory holding path, so that the rename itself is durable.
 * File systems that cannot sync a directory (EINVAL) are accepted. */
static int sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = NULL;
    if (!slash) {
        dir = malloc(2);
        if (dir) memcpy(dir, ".", 2);
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        dir = malloc(n + 1);
        if (dir) {
            memcpy(dir, path, n);
            dir[n] = '\0';
        }
    }
    if (!dir) return ENOMEM;
    int err = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        err = errno;
    } else {
        if (fsync(fd) != 0 && errno != EINVAL) err = errno;
        close(fd);
    }
    free(dir);
    return err;
}

cml_status cml__atomic_commit(cml__atomic_file *f) {
    if (f->fp || f->failed || !f->tmp)
        return cml__error(CML_ERR_INTERNAL, "%s: internal error: \"%s\" committed before it was finished", f->who,
                          f->path ? f->path : "?");
    if (rename(f->tmp, f->path) != 0) return io_error(f, "rename the temporary file over", f->path, errno);
    f->committed = true;
    int err = sync_dir(f->path);
    cml_status s = err ? io_error(f, "sync the directory of", f->path, err) : CML_OK;
    cml__atomic_abort(f); /* frees the names */
    return s;
}

void cml__atomic_abort(cml__atomic_file *f) {
    if (f->fp) {
        fclose(f->fp);
        f->fp = NULL;
    }
    if (f->tmp && !f->committed) remove(f->tmp);
    free(f->tmp);
    free(f->path);
    f->tmp = f->path = NULL;
}
