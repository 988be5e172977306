/*
 * policy.c -- the sync policies, as data.
 *
 * Each row says where the scheduler puts host syncs and event
 * synchronisations (the host blocks: s), stream-side event waits (w) and
 * records (r) around the input copies (a async, c blocking) and the graph
 * launch (g) of a split; the letters are the sync pattern's
 * (traces/pattern.c), read from the trace a run records. The scheduler
 * (sched.c) interprets the row; it has no branch per policy.
 *
 *   full               sassassasg per split of three inputs: a sync before
 *                      and after every copy (ggml before the async rework).
 *   relaxed            saaasg: one sync before the copies, one after.
 *   events             ggml today: a user input waits for its slot's event
 *                      on the host and is copied blocking; other inputs
 *                      make the copying queue wait for the slot's event and
 *                      copy asynchronously; every split records its event.
 *   async-user-inputs  events, but user inputs are copied asynchronously:
 *                      under pipeline parallelism the host overwrites an
 *                      input still being copied (the reverted change).
 *   no-split-wait      events, but a split without inputs does not wait
 *                      for the previous split although the allocator
 *                      reuses memory another backend still reads.
 */
#include "sched.h"

#include <stdio.h>
#include <string.h>

static const sched_policy policy_full = {
    .name = "full",
    .summary = "sync before and after every input copy (sassassasg)",
    .before_copy = SCHED_GUARD_SYNC,
    .after_copy = SCHED_GUARD_SYNC,
    .user_copy = SCHED_COPY_ASYNC,
    .input_copy = SCHED_COPY_ASYNC,
    .wait_if_no_inputs = true,
};

static const sched_policy policy_relaxed = {
    .name = "relaxed",
    .summary = "one sync before and one after a split's input copies (saaasg)",
    .sync_before_inputs = true,
    .sync_after_inputs = true,
    .user_copy = SCHED_COPY_ASYNC,
    .input_copy = SCHED_COPY_ASYNC,
    .wait_if_no_inputs = true,
};

static const sched_policy policy_events = {
    .name = "events",
    .summary = "ggml today: per-slot events, blocking user-input copies",
    .before_copy = SCHED_GUARD_EVENT,
    .user_copy = SCHED_COPY_BLOCKING,
    .input_copy = SCHED_COPY_ASYNC,
    .record_after_split = true,
    .wait_if_no_inputs = true,
};

static const sched_policy policy_async_user_inputs = {
    .name = "async-user-inputs",
    .summary = "BROKEN: events with asynchronous user-input copies (host overwrites inputs)",
    .before_copy = SCHED_GUARD_EVENT,
    .user_copy = SCHED_COPY_ASYNC,
    .input_copy = SCHED_COPY_ASYNC,
    .record_after_split = true,
    .wait_if_no_inputs = true,
};

static const sched_policy policy_no_split_wait = {
    .name = "no-split-wait",
    .summary = "BROKEN: events, but a split without inputs does not wait for the previous one",
    .before_copy = SCHED_GUARD_EVENT,
    .user_copy = SCHED_COPY_BLOCKING,
    .input_copy = SCHED_COPY_ASYNC,
    .record_after_split = true,
    .wait_if_no_inputs = false,
};

const sched_policy *const sched_policies[] = {
    &policy_full, &policy_relaxed, &policy_events, &policy_async_user_inputs,
    &policy_no_split_wait, NULL,
};

const sched_policy *sched_policy_find(const char *name)
{
    for (int i = 0; sched_policies[i]; i++)
        if (strcmp(sched_policies[i]->name, name) == 0)
            return sched_policies[i];
    return NULL;
}

const char *sched_policy_names(void)
{
    /* Built once from the table, so a new policy needs no message edits. */
    static char names[256];
    if (!names[0]) {
        size_t used = 0;
        for (int i = 0; sched_policies[i] && used < sizeof names; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s",
                                     i == 0 ? "" : sched_policies[i + 1] ? ", " : " or ",
                                     sched_policies[i]->name);
    }
    return names;
}

static const struct { const char *word, *help; } allreduce_info[] = {
#define SCHED_ALLREDUCE_INFO(name, word, text) { word, text },
    SCHED_ALLREDUCE_MAP(SCHED_ALLREDUCE_INFO)
#undef SCHED_ALLREDUCE_INFO
};

const char *sched_allreduce_str(sched_allreduce a) { return allreduce_info[a].word; }
const char *sched_allreduce_help(sched_allreduce a) { return allreduce_info[a].help; }

int sched_allreduce_parse(const char *word)
{
    for (int i = 0; i < SCHED_ALLREDUCE_COUNT; i++)
        if (strcmp(allreduce_info[i].word, word) == 0)
            return i;
    return -1;
}

const char *sched_allreduce_names(void)
{
    static char names[128];
    if (!names[0]) {
        size_t used = 0;
        for (int i = 0; i < SCHED_ALLREDUCE_COUNT && used < sizeof names; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s",
                                     i == 0 ? "" : i + 1 < SCHED_ALLREDUCE_COUNT ? ", " : " or ",
                                     allreduce_info[i].word);
    }
    return names;
}
