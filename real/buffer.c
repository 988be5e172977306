/*
 * buffer.c -- the memory of the real backends.
 *
 * Every buffer, the cpu's and a cpustream device's alike, is host memory
 * (64-byte aligned, zeroed): sched_buffer.ctx is its bytes. A cpustream
 * device only counts its buffers against its capacity (mem=); the
 * emulation keeps them addressable by the host so that a missing sync
 * shows as wrong numbers, not as a crash. Beside CUDA devices the cpu's
 * buffers are pinned (real_host_alloc; sched_buffer.pinned says it), so
 * that the GPUs' copies from and to them are asynchronous.
 */
#include "real_int.h"

#include <stdlib.h>
#include <string.h>

sched_buffer *real_buffer_new(sched_backend *b, const char *name, uint64_t size,
                              sched_buffer_usage usage, bool host)
{
    sched_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return NULL;
    uint64_t alloc = (size + 63) & ~(uint64_t)63;
    /* The cpu's memory beside CUDA devices: pinned (copies are DMA). */
    buf->pinned = host && (buf->ctx = real_host_alloc(alloc ? alloc : 64)) != NULL;
    if (!buf->pinned)
        buf->ctx = aligned_alloc(64, alloc ? alloc : 64);
    if (!buf->ctx) {
        free(buf);
        return NULL;
    }
    if (!buf->pinned)
        memset(buf->ctx, 0, alloc ? alloc : 64);
    buf->backend = b;
    buf->size = size;
    buf->usage = usage;
    buf->host = host;
    buf->trace_id = TRACE_NONE;
    snprintf(buf->name, sizeof buf->name, "%s", name);
    return buf;
}

void real_buffer_free(sched_buffer *buf)
{
    if (!buf)
        return;
    if (buf->pinned)
        real_host_free(buf->ctx);
    else
        free(buf->ctx);
    free(buf);
}

void *real_tensor_data(const sched_tensor *t)
{
    if (!t->buffer || !t->buffer->ctx)
        return NULL;
    return (char *)t->buffer->ctx + t->offset;
}

sched_tensor *real_host_tensor_new(sched_backend **backends, size_t n, const sched_tensor *like,
                                   const char *name)
{
    if (n == 0)
        return NULL;
    sched_backend *cpu = backends[n - 1];
    sched_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    *t = *like;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->op = SCHED_OP_NONE;
    for (int i = 0; i < SCHED_MAX_SRC; i++)
        t->src[i] = -1;
    t->view_src = -1;
    t->flags = 0;
    t->buffer = cpu->iface->buffer_alloc(cpu, name, sched_tensor_nbytes(like), SCHED_BUFFER_HOST);
    t->offset = 0;
    t->trace_view = t->buffer ? t->buffer->trace_id : TRACE_NONE;
    if (!t->buffer) {
        free(t);
        return NULL;
    }
    return t;
}

void real_host_tensor_free(sched_backend **backends, size_t n, sched_tensor *t)
{
    if (!t)
        return;
    sched_backend *cpu = n ? backends[n - 1] : NULL;
    if (cpu && cpu->iface->buffer_free)
        cpu->iface->buffer_free(cpu, t->buffer);
    else
        real_buffer_free(t->buffer);
    free(t);
}

int real_read_output(const sched_tensor *t, float *out)
{
    void *d = real_tensor_data(t);
    if (!d)
        return -1;
    real_tensor rt = { t->type, { t->ne[0], t->ne[1], t->ne[2], t->ne[3] }, d };
    int64_t ne = sched_tensor_nelements(t);
    for (int64_t i = 0; i < ne; i++)
        out[i] = real_load_f32(&rt, i);
    return 0;
}
