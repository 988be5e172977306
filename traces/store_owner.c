/*
 * store_owner.c -- who writes a run: the lock a producer holds on the run
 * it records, so that `syncsim runs --delete` can tell a run being written
 * from one whose producer died (issue 34).
 *
 * The lock
 * --------
 * A producer (the recorder; an import, for the length of its transaction)
 * takes a shared open-file-description lock (fcntl F_OFD_SETLK, F_RDLCK)
 * on one byte of the database file, STORE_RUN_LOCK_BASE + the run's id,
 * before the transaction that adds the run row commits: no other process
 * ever sees the run without its lock. The kernel drops the lock when the
 * producer ends, however it ends (kill -9 included), and over NFS the
 * lock manager does the same. A run is live while another open file
 * description holds that byte (F_OFD_GETLK reports a conflicting lock);
 * the byte is far above the ones SQLite locks (around 1 GiB), so the two
 * never meet.
 *
 * One descriptor per database file and process, never closed: closing any
 * descriptor of a file drops every POSIX lock the process holds on it --
 * SQLite's own locks included, which would let another process think our
 * connection gone and checkpoint the WAL under it. So the descriptor stays
 * open until the process ends (O_CLOEXEC: a program it executes does not
 * inherit it), and a run's lock is given back with F_UNLCK, not close().
 * The stores of one process share that descriptor, whose own locks never
 * conflict with it; which store claimed which run is therefore kept here
 * too, and a run claimed by another store of this process is live.
 *
 * Where the kernel has no OFD locks (not Linux, or a Linux before 3.15 or a
 * file system that refuses them: EINVAL), nothing is locked and every run
 * of another process counts as not live: `runs --delete --force` then
 * trusts the user, as it did before.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The byte of run r is STORE_RUN_LOCK_BASE + r: 4 TiB, far above SQLite's
 * lock bytes (PENDING_BYTE, 0x40000000, and the 510 after it). */
#define STORE_RUN_LOCK_BASE ((off_t)1 << 42)

typedef struct run_claim {
    int64_t run;
    const trace_store *owner;
} run_claim;

/* A database file this process locked runs in: its descriptor (kept open,
 * see above) and the runs claimed through it. */
typedef struct lock_file {
    dev_t dev;
    ino_t ino;
    int fd;
    run_claim *claims;
    size_t n_claims, cap_claims;
    struct lock_file *next;
} lock_file;

static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static lock_file *files;
static pid_t files_pid;         /* the process the list belongs to (a forked child starts over) */
static lock_file *inherited;    /* a forked child's copy of its parent's list, kept reachable */

/* The lock_file of path (made when absent and `make`), or NULL. Called with
 * files_lock held. */
static lock_file *file_of(const char *path, bool make)
{
    if (files_pid != getpid()) {
        /* a child of fork(): its parent's descriptors are the parent's
         * locks; leave them, and keep lists of its own */
        if (files && !inherited)
            inherited = files;
        files = NULL;
        files_pid = getpid();
    }
    struct stat sb;
    if (stat(path, &sb) != 0)
        return NULL;
    for (lock_file *lf = files; lf; lf = lf->next)
        if (lf->dev == sb.st_dev && lf->ino == sb.st_ino)
            return lf;
    if (!make)
        return NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    lock_file *lf = calloc(1, sizeof *lf);
    if (!lf) {
        close(fd);      /* opened just now and never locked: nothing to drop */
        return NULL;
    }
    lf->dev = sb.st_dev;
    lf->ino = sb.st_ino;
    lf->fd = fd;
    lf->next = files;
    files = lf;
    return lf;
}

#ifdef F_OFD_SETLK
static int run_lock(int fd, int64_t run, short type, int cmd)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
                        .l_start = STORE_RUN_LOCK_BASE + (off_t)run, .l_len = 1 };
    int rc = fcntl(fd, cmd, &fl);
    if (cmd == F_OFD_GETLK)
        return rc == 0 && fl.l_type != F_UNLCK;
    return rc;
}
#endif

int store_claim_run(trace_store *st, int64_t run, trace_error *err)
{
#ifdef F_OFD_SETLK
    pthread_mutex_lock(&files_lock);
    lock_file *lf = file_of(st->path, true);
    int rc = -1;
    if (!lf) {
        trace_error_set(err, TRACE_EIO, "%s: cannot open it to lock run %lld: %s", st->path,
                        (long long)run, strerror(errno ? errno : ENOMEM));
        goto out;
    }
    if (lf->n_claims == lf->cap_claims) {
        size_t cap = lf->cap_claims ? lf->cap_claims * 2 : 4;
        run_claim *nc = realloc(lf->claims, cap * sizeof *nc);
        if (!nc) {
            trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", st->path);
            goto out;
        }
        lf->claims = nc;
        lf->cap_claims = cap;
    }
    /* EINVAL: a kernel or file system without OFD locks; the run is then
     * written unlocked, as where F_OFD_SETLK is not defined */
    if (run_lock(lf->fd, run, F_RDLCK, F_OFD_SETLK) != 0 && errno != EINVAL) {
        trace_error_set(err, TRACE_EIO, "%s: cannot lock run %lld (fcntl: %s)", st->path,
                        (long long)run, strerror(errno));
        goto out;
    }
    lf->claims[lf->n_claims++] = (run_claim){ run, st };
    rc = 0;
out:
    pthread_mutex_unlock(&files_lock);
    return rc;
#else
    (void)st;
    (void)run;
    (void)err;
    return 0;
#endif
}

void store_release_runs(trace_store *st)
{
#ifdef F_OFD_SETLK
    pthread_mutex_lock(&files_lock);
    /* every file, not only st->path's: the file may be gone (a failed
     * import removes the database it created) */
    for (lock_file *lf = files_pid == getpid() ? files : NULL; lf; lf = lf->next) {
        size_t kept = 0;
        for (size_t i = 0; i < lf->n_claims; i++) {
            if (lf->claims[i].owner == st)
                run_lock(lf->fd, lf->claims[i].run, F_UNLCK, F_OFD_SETLK);
            else
                lf->claims[kept++] = lf->claims[i];
        }
        lf->n_claims = kept;
    }
    pthread_mutex_unlock(&files_lock);
#else
    (void)st;
#endif
}

bool store_run_live(trace_store *st, int64_t run)
{
#ifdef F_OFD_SETLK
    pthread_mutex_lock(&files_lock);
    bool live = false;
    lock_file *lf = file_of(st->path, true);
    for (size_t i = 0; lf && i < lf->n_claims && !live; i++)
        live = lf->claims[i].run == run && lf->claims[i].owner != st;
    if (lf && !live)
        live = run_lock(lf->fd, run, F_WRLCK, F_OFD_GETLK) == 1;
    pthread_mutex_unlock(&files_lock);
    return live;
#else
    (void)st;
    (void)run;
    return false;
#endif
}
