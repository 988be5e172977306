/*
 * outfile.c -- files written whole or not at all: into a temporary file
 * beside the destination (same directory, so same file system), renamed
 * over it only when everything was written. A failed or interrupted
 * command leaves the destination as it was and nothing else behind; the
 * result gets the mode any new file gets (0666 less the umask).
 */
#include "trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *trace_out_open(const char *path, char **tmp, trace_error *err)
{
    *tmp = NULL;
    size_t len = strlen(path) + 16;
    char *t = malloc(len);
    if (!t)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path), NULL;
    snprintf(t, len, "%s.tmpXXXXXX", path);
    int fd = mkstemp(t);
    if (fd >= 0) {
        /* mkstemp makes it 0600: give it a new file's mode */
        mode_t mask = umask(0);
        umask(mask);
        fchmod(fd, 0666 & ~mask);
    }
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(t);
        }
        free(t);
        trace_error_set(err, TRACE_EIO, "%s: cannot write: %s", path, strerror(e));
        return NULL;
    }
    *tmp = t;
    return f;
}

int trace_out_close(FILE *f, const char *path, char *tmp, bool ok, trace_error *err)
{
    if (fclose(f) != 0 && ok) {
        trace_error_set(err, TRACE_EIO, "%s: cannot write: %s", path, strerror(errno));
        ok = false;
    }
    if (ok && rename(tmp, path) != 0) {
        trace_error_set(err, TRACE_EIO, "%s: cannot write: %s", path, strerror(errno));
        ok = false;
    }
    if (!ok)
        unlink(tmp);
    free(tmp);
    return ok ? 0 : -1;
}

int trace_out_write(const char *path, const void *data, size_t len, trace_error *err)
{
    char *tmp;
    FILE *f = trace_out_open(path, &tmp, err);
    if (!f)
        return -1;
    bool ok = fwrite(data, 1, len, f) == len;
    if (!ok)
        trace_error_set(err, TRACE_EIO, "%s: write failed: %s", path, strerror(errno));
    return trace_out_close(f, path, tmp, ok, err);
}
