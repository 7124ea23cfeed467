/* IDX files (the MNIST format), raw or gzip-compressed.
 *
 * Layout: magic (0, 0, type code, ndims), ndims big-endian u32 dims, then the
 * payload in row-major order, big-endian for multi-byte types. zlib's gzread
 * reads both raw and gzip files; every short read or stream error becomes
 * CML_ERR_CORRUPT naming the file and the expected and found byte counts. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "camel/data.h"
#include "runtime/error.h"

#define IDX_MAX_DIMS 4
#define IDX_MAX_DIM 0x7fffffffu
/* Deflate cannot expand data by more than about 1032:1, so a gzip file of
 * `size` bytes holds at most this much; a header asking for more is corrupt. */
#define GZIP_MAX_RATIO 1032u
#define READ_CHUNK (1u << 24)

typedef struct idx_file {
    const char *path;
    gzFile gz;
    int64_t file_size; /* bytes on disk */
    bool gzip;         /* starts with the gzip magic 1f 8b */
} idx_file;

/* The status of a failed tensor call (which already set the error), or OOM. */
static cml_status tensor_failure(const char *path) {
    cml_status s = cml_last_status();
    if (s != CML_OK) return s;
    return cml__error(CML_ERR_OOM, "cml_idx_load: \"%s\": could not allocate the tensor", path);
}

/* Looks at the file with stdio first: existence (errno for the message), its
 * size and whether it is gzip-compressed. */
static cml_status idx_probe(idx_file *f) {
    errno = 0;
    FILE *fp = fopen(f->path, "rb");
    if (!fp)
        return cml__error(CML_ERR_IO,
                          "cml_idx_load: cannot open \"%s\": %s (check the path; IDX files are named "
                          "like train-images-idx3-ubyte, optionally with .gz)",
                          f->path, strerror(errno));
    unsigned char head[2] = {0, 0};
    size_t got = fread(head, 1, 2, fp);
    if (got < 2 && ferror(fp)) {
        int e = errno;
        fclose(fp);
        return cml__error(CML_ERR_IO, "cml_idx_load: cannot read \"%s\": %s", f->path, strerror(e));
    }
    f->gzip = got == 2 && head[0] == 0x1f && head[1] == 0x8b;
    long size = -1;
    if (fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
    fclose(fp);
    f->file_size = size;
    return CML_OK;
}

/* gzerror's message without the "<path>: " prefix zlib puts in front. */
static const char *gz_message(const idx_file *f, int *errnum) {
    const char *msg = gzerror(f->gz, errnum);
    size_t n = strlen(f->path);
    if (strncmp(msg, f->path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
    return msg;
}

/* Reads exactly n bytes (what: "header", "payload") at uncompressed position
 * `base`. A short read, a truncated gzip stream or corrupt deflate data is
 * CML_ERR_CORRUPT; a failing read(2) is CML_ERR_IO. */
static cml_status idx_read(idx_file *f, void *buf, uint64_t n, uint64_t base, const char *what) {
    unsigned char *p = buf;
    uint64_t done = 0;
    while (done < n) {
        uint64_t want = n - done < READ_CHUNK ? n - done : READ_CHUNK;
        int got = gzread(f->gz, p + done, (unsigned)want);
        if (got > 0) done += (uint64_t)got;
        if (got == (int)want) continue;
        /* Short read or error: gzread may drop bytes it had decoded when it
         * fails, so the position it reports is what was really delivered. */
        z_off_t pos = gztell(f->gz);
        uint64_t found = pos >= 0 && (uint64_t)pos >= base ? (uint64_t)pos - base : done;
        int errnum = Z_OK;
        const char *zmsg = gz_message(f, &errnum);
        if (errnum == Z_ERRNO)
            return cml__error(CML_ERR_IO, "cml_idx_load: reading \"%s\": %s", f->path, strerror(errno));
        if (errnum != Z_OK && errnum != Z_BUF_ERROR)
            return cml__error(CML_ERR_CORRUPT,
                              "cml_idx_load: \"%s\": corrupt gzip data (%s): expected %llu bytes of %s, "
                              "found %llu before the error",
                              f->path, zmsg, (unsigned long long)n, what, (unsigned long long)found);
        return cml__error(CML_ERR_CORRUPT,
                          "cml_idx_load: \"%s\" is truncated: expected %llu bytes of %s, found %llu%s",
                          f->path, (unsigned long long)n, what, (unsigned long long)found,
                          errnum == Z_BUF_ERROR ? " (the gzip stream ends early)" : "");
    }
    return CML_OK;
}

/* After the payload: nothing may follow, and a gzip stream must end cleanly. */
static cml_status idx_check_end(idx_file *f, uint64_t total) {
    unsigned char scratch[4096];
    uint64_t extra = 0;
    int got;
    while ((got = gzread(f->gz, scratch, sizeof scratch)) > 0) extra += (uint64_t)got;
    if (extra > 0)
        return cml__error(CML_ERR_CORRUPT,
                          "cml_idx_load: \"%s\": %llu trailing bytes after the payload (expected %llu "
                          "bytes in all, found %llu)",
                          f->path, (unsigned long long)extra, (unsigned long long)total,
                          (unsigned long long)(total + extra));
    int errnum = Z_OK;
    const char *zmsg = gz_message(f, &errnum);
    if (errnum == Z_ERRNO)
        return cml__error(CML_ERR_IO, "cml_idx_load: reading \"%s\": %s", f->path, strerror(errno));
    if (errnum != Z_OK)
        return cml__error(CML_ERR_CORRUPT,
                          "cml_idx_load: \"%s\": the gzip stream is truncated or corrupt after the "
                          "%llu bytes of IDX data (%s)",
                          f->path, (unsigned long long)total, zmsg);
    return CML_OK;
}

static uint32_t be32(const unsigned char *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Parses the magic and the dims; fills dtype, ndim, shape and the payload size. */
static cml_status idx_header(idx_file *f, cml_dtype *dt, int *ndim, int64_t *shape, uint64_t *payload) {
    unsigned char magic[4];
    CML_TRY(idx_read(f, magic, 4, 0, "header"));
    if (magic[0] != 0 || magic[1] != 0)
        return cml__error(CML_ERR_CORRUPT,
                          "cml_idx_load: \"%s\": bad magic 0x%02x%02x%02x%02x, not an IDX file (its "
                          "first two bytes must be 0)",
                          f->path, magic[0], magic[1], magic[2], magic[3]);
    size_t esize;
    switch (magic[2]) {
    case 0x08: *dt = CML_U8; esize = 1; break;
    case 0x0C: *dt = CML_I32; esize = 4; break;
    case 0x0D: *dt = CML_F32; esize = 4; break;
    default:
        return cml__error(CML_ERR_CORRUPT,
                          "cml_idx_load: \"%s\": unsupported IDX type code 0x%02x (supported: 0x08 u8, "
                          "0x0C i32, 0x0D f32)",
                          f->path, magic[2]);
    }
    int nd = magic[3];
    if (nd < 1 || nd > IDX_MAX_DIMS)
        return cml__error(CML_ERR_CORRUPT, "cml_idx_load: \"%s\": ndims=%d must be in [1, %d]", f->path,
                          nd, IDX_MAX_DIMS);
    unsigned char dims[4 * IDX_MAX_DIMS];
    CML_TRY(idx_read(f, dims, 4u * (unsigned)nd, 4, "dims"));
    uint64_t count = 1;
    for (int i = 0; i < nd; i++) {
        uint32_t d = be32(dims + 4 * i);
        if (d == 0 || d > IDX_MAX_DIM)
            return cml__error(CML_ERR_CORRUPT,
                              "cml_idx_load: \"%s\": dimension %d is %u, must be in [1, 2^31-1]",
                              f->path, i, d);
        if (count > (uint64_t)INT64_MAX / esize / d)
            return cml__error(CML_ERR_CORRUPT,
                              "cml_idx_load: \"%s\": the dims describe more than 2^63 bytes", f->path);
        count *= d;
        shape[i] = (int64_t)d;
    }
    *ndim = nd;
    *payload = count * esize;
    if (*payload > SIZE_MAX)
        return cml__error(CML_ERR_CORRUPT, "cml_idx_load: \"%s\": payload of %llu bytes is too large",
                          f->path, (unsigned long long)*payload);
    return CML_OK;
}

/* Checks the payload size against the file before allocating it, so that a
 * corrupt header cannot ask for terabytes. */
static cml_status idx_check_size(const idx_file *f, uint64_t header, uint64_t payload) {
    if (f->file_size < 0) return CML_OK; /* unknown (a pipe): the reads will tell */
    uint64_t size = (uint64_t)f->file_size;
    if (!f->gzip) {
        if (size < header + payload)
            return cml__error(CML_ERR_CORRUPT,
                              "cml_idx_load: \"%s\" is truncated: expected %llu bytes of payload, found %llu",
                              f->path, (unsigned long long)payload, (unsigned long long)(size - header));
        if (size > header + payload)
            return cml__error(CML_ERR_CORRUPT,
                              "cml_idx_load: \"%s\": %llu trailing bytes after the payload (expected %llu "
                              "bytes in all, found %llu)",
                              f->path, (unsigned long long)(size - header - payload),
                              (unsigned long long)(header + payload), (unsigned long long)size);
        return CML_OK;
    }
    uint64_t max_out = size * GZIP_MAX_RATIO + 65536;
    if (header + payload > max_out)
        return cml__error(CML_ERR_CORRUPT,
                          "cml_idx_load: \"%s\" is truncated or corrupt: expected %llu bytes of payload, "
                          "but a gzip file of %llu bytes holds at most %llu",
                          f->path, (unsigned long long)payload, (unsigned long long)size,
                          (unsigned long long)max_out);
    return CML_OK;
}

/* Big-endian 4-byte elements to host order, in place. */
static void swap_be32(unsigned char *p, uint64_t count) {
    for (uint64_t i = 0; i < count; i++, p += 4) {
        uint32_t v = be32(p);
        memcpy(p, &v, 4);
    }
}

static cml_status idx_load_open(idx_file *f, cml_tensor **out) {
    cml_dtype dt = CML_U8;
    int ndim = 0;
    int64_t shape[IDX_MAX_DIMS];
    uint64_t payload = 0;
    CML_TRY(idx_header(f, &dt, &ndim, shape, &payload));
    uint64_t header = 4 + 4 * (uint64_t)ndim;
    CML_TRY(idx_check_size(f, header, payload));

    cml_tensor *t = cml_tensor_empty(ndim, shape, dt, CML_DEVICE_CPU);
    if (!t) return tensor_failure(f->path);
    unsigned char *data = cml_tensor_data(t);
    cml_status s = idx_read(f, data, payload, header, "payload");
    if (s == CML_OK) s = idx_check_end(f, header + payload);
    if (s != CML_OK) {
        cml_tensor_release(t);
        return s;
    }
    if (dt != CML_U8) swap_be32(data, payload / 4);
    *out = t;
    return CML_OK;
}

cml_status cml_idx_load(const char *path, cml_tensor **out) {
    CML_CHECK_ARG(out != NULL, "cml_idx_load: out must not be NULL");
    *out = NULL;
    CML_CHECK_ARG(path != NULL, "cml_idx_load: path must not be NULL");
    idx_file f = {path, NULL, -1, false};
    CML_TRY(idx_probe(&f));
    errno = 0;
    f.gz = gzopen(path, "rb");
    if (!f.gz) {
        if (errno != 0)
            return cml__error(CML_ERR_IO, "cml_idx_load: cannot open \"%s\": %s", path, strerror(errno));
        return cml__error(CML_ERR_OOM, "cml_idx_load: gzopen(\"%s\") ran out of memory", path);
    }
    gzbuffer(f.gz, 1u << 17);
    cml_status s = idx_load_open(&f, out);
    gzclose(f.gz);
    return s;
}
