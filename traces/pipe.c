/*
 * pipe.c -- statements from a producer thread, in batches (see pipe.h).
 *
 * Three batches circulate between two states: free (the producer may fill
 * it) and full (a ring the consumer takes in order). The consumer gives a
 * batch back when it moves past its last statement. One mutex and one
 * condition variable guard the counts; statements are copied only into the
 * batch, never again.
 */
#include "pipe.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PIPE_BATCHES 3

struct stmt_pipe {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    stmt_batch batch[PIPE_BATCHES];
    uint32_t full_head, n_full;     /* ring of batches ready for the consumer */
    uint32_t n_free;                /* batches the producer may fill */
    stmt_batch *cur;                /* the consumer's */
    stmt_pipe_fill fill;
    void *ctx;
    bool hold;
    uint64_t produced, resumed;     /* hold: batches pushed, and let go */
    bool stop;
};

/* Grows *pool (elem bytes each) to hold need; 0 or -1. */
static int pool_grow(void **pool, uint64_t *cap, uint64_t need, size_t elem, uint64_t first)
{
    if (need <= *cap)
        return 0;
    uint64_t ncap = *cap ? *cap * 2 : first;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*pool, ncap * elem);
    if (!p)
        return -1;
    *pool = p;
    *cap = ncap;
    return 0;
}

int stmt_batch_push(stmt_batch *b, const trace_stmt *s, const char *label, size_t len)
{
    if (pool_grow((void **)&b->acc, &b->cap_acc, b->n_acc + s->n_access, sizeof *b->acc, 8192) ||
        pool_grow((void **)&b->attr, &b->cap_attr, b->n_attr + s->n_attr, sizeof *b->attr, 1024) ||
        (label && pool_grow((void **)&b->text, &b->cap_text, b->n_text + 4 + len + 1, 1, 65536)))
        return -1;
    trace_stmt *d = &b->stmts[b->n];
    *d = *s;
    /* offsets now, pointers when handed out: the pools may still move */
    d->access = (const trace_access *)(uintptr_t)b->n_acc;
    d->attr = (const trace_attr *)(uintptr_t)b->n_attr;
    if (s->n_access)            /* memcpy with NULL is undefined even for 0 bytes */
        memcpy(b->acc + b->n_acc, s->access, s->n_access * sizeof *b->acc);
    if (s->n_attr)
        memcpy(b->attr + b->n_attr, s->attr, s->n_attr * sizeof *b->attr);
    b->n_acc += s->n_access;
    b->n_attr += s->n_attr;
    b->label_at[b->n] = UINT64_MAX;
    if (label) {                /* its length, then its bytes and a NUL */
        uint32_t n = (uint32_t)len;
        b->label_at[b->n] = b->n_text;
        memcpy(b->text + b->n_text, &n, 4);
        memcpy(b->text + b->n_text + 4, label, len);
        b->text[b->n_text + 4 + len] = '\0';
        b->n_text += 4 + len + 1;
    }
    b->n++;
    return 0;
}

static void *produce(void *arg)
{
    stmt_pipe *pp = arg;
    uint32_t next = 0;                  /* the batch it fills next */
    for (;;) {
        pthread_mutex_lock(&pp->lock);
        while (!pp->n_free && !pp->stop)
            pthread_cond_wait(&pp->changed, &pp->lock);
        bool stop = pp->stop;
        if (!stop)
            pp->n_free--;
        pthread_mutex_unlock(&pp->lock);
        if (stop)
            break;
        stmt_batch *b = &pp->batch[next];
        next = (next + 1) % PIPE_BATCHES;
        b->n = b->pos = 0;
        b->n_acc = b->n_attr = b->n_text = 0;
        b->status = pp->fill(pp->ctx, b);
        pthread_mutex_lock(&pp->lock);
        pp->n_full++;
        pp->produced++;
        bool last = b->status != 1;
        pthread_cond_broadcast(&pp->changed);
        while (pp->hold && !last && pp->resumed < pp->produced && !pp->stop)
            pthread_cond_wait(&pp->changed, &pp->lock);
        pthread_mutex_unlock(&pp->lock);
        if (last)
            break;
    }
    return NULL;
}

static void pipe_free(stmt_pipe *pp)
{
    pthread_mutex_destroy(&pp->lock);
    pthread_cond_destroy(&pp->changed);
    for (int i = 0; i < PIPE_BATCHES; i++) {
        free(pp->batch[i].stmts);
        free(pp->batch[i].label_at);
        free(pp->batch[i].acc);
        free(pp->batch[i].attr);
        free(pp->batch[i].text);
    }
    free(pp);
}

stmt_pipe *stmt_pipe_start(stmt_pipe_fill fill, void *ctx, bool hold)
{
    stmt_pipe *pp = calloc(1, sizeof *pp);
    if (!pp)
        return NULL;
    pthread_mutex_init(&pp->lock, NULL);
    pthread_cond_init(&pp->changed, NULL);
    for (int i = 0; i < PIPE_BATCHES; i++) {
        pp->batch[i].stmts = malloc(STMT_BATCH * sizeof *pp->batch[i].stmts);
        pp->batch[i].label_at = malloc(STMT_BATCH * sizeof *pp->batch[i].label_at);
        if (!pp->batch[i].stmts || !pp->batch[i].label_at) {
            pipe_free(pp);
            return NULL;
        }
    }
    pp->n_free = PIPE_BATCHES;
    pp->fill = fill;
    pp->ctx = ctx;
    pp->hold = hold;
    if (pthread_create(&pp->thread, NULL, produce, pp) != 0) {
        pipe_free(pp);
        return NULL;
    }
    return pp;
}

void stmt_pipe_resume(stmt_pipe *pp)
{
    pthread_mutex_lock(&pp->lock);
    pp->resumed++;
    pthread_cond_broadcast(&pp->changed);
    pthread_mutex_unlock(&pp->lock);
}

int stmt_pipe_next(stmt_pipe *pp, trace_stmt *s, const char **label, size_t *len, bool *fresh,
                   trace_error *err)
{
    stmt_batch *b = pp->cur;
    bool opened = false;
    while (!b || b->pos == b->n) {
        if (b && b->status != 1) {
            if (b->status < 0 && err)
                *err = b->err;
            return b->status;   /* and again on every later call */
        }
        if (b && opened && pp->hold)
            stmt_pipe_resume(pp);       /* an empty batch that is not the last */
        pthread_mutex_lock(&pp->lock);
        if (b)
            pp->n_free++;       /* give the consumed batch back */
        while (!pp->n_full)
            pthread_cond_wait(&pp->changed, &pp->lock);
        b = pp->cur = &pp->batch[pp->full_head];
        pp->full_head = (pp->full_head + 1) % PIPE_BATCHES;
        pp->n_full--;
        pthread_cond_broadcast(&pp->changed);
        pthread_mutex_unlock(&pp->lock);
        opened = true;
    }
    uint32_t i = b->pos++;
    *s = b->stmts[i];
    s->access = s->n_access ? b->acc + (uintptr_t)s->access : NULL;
    s->attr = s->n_attr ? b->attr + (uintptr_t)s->attr : NULL;
    if (label) {
        *label = NULL;
        *len = 0;
        if (b->label_at[i] != UINT64_MAX) {
            uint32_t n;
            memcpy(&n, b->text + b->label_at[i], 4);
            *label = b->text + b->label_at[i] + 4;
            *len = n;
        }
    }
    if (fresh)
        *fresh = opened;
    return 1;
}

void stmt_pipe_stop(stmt_pipe *pp)
{
    if (!pp)
        return;
    pthread_mutex_lock(&pp->lock);
    pp->stop = true;
    pthread_cond_broadcast(&pp->changed);
    pthread_mutex_unlock(&pp->lock);
    pthread_join(pp->thread, NULL);
    pipe_free(pp);
}
