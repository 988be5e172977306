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
 *   events             close to ggml-head: a user input waits for its slot's event
 *                      on the host and is copied blocking; other inputs
 *                      make the copying queue wait for the slot's event and
 *                      copy asynchronously; every split records its event.
 *   async-user-inputs  events, but user inputs are copied asynchronously:
 *                      under pipeline parallelism the host overwrites an
 *                      input still being copied (the reverted change).
 *   no-split-wait      events, but a split without inputs does not wait
 *                      for the previous split although the allocator
 *                      reuses memory another backend still reads.
 *   ggml-pre-17795,    ggml's scheduler before #17795 and before #26040
 *   ggml-pre-26040     (the same compute_splits: the PRs' real baselines),
 *   ggml-17795         ggml's scheduler as llama.cpp #17795 left it,
 *   ggml-20793         ... as #20793 left it,
 *   ggml-head          ... at the pinned ggml commit (after #26040): each
 *                      with ggml's copy slots (see below).
 *   ggml-source-wait   ggml-head with the fix of its slot-reuse race.
 * The first five are syncsim's own model of ggml (events always, one host
 * buffer per input, cur_copy rotating every evaluation); the ggml-* rows
 * follow ggml-backend.cpp line by line (docs/scheduler.md).
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
    .no_input_wait = SCHED_NOINPUT_READERS,
    .copy_from_host = true,
};

static const sched_policy policy_relaxed = {
    .name = "relaxed",
    .summary = "one sync before and one after a split's input copies (saaasg)",
    .sync_before_inputs = true,
    .sync_after_inputs = true,
    .user_copy = SCHED_COPY_ASYNC,
    .input_copy = SCHED_COPY_ASYNC,
    .no_input_wait = SCHED_NOINPUT_READERS,
    .copy_from_host = true,
};

static const sched_policy policy_events = {
    .name = "events",
    .summary = "per-slot events (syncsim's model, near ggml-head), blocking user-input copies",
    .before_copy = SCHED_GUARD_EVENT,
    .user_copy = SCHED_COPY_BLOCKING,
    .input_copy = SCHED_COPY_ASYNC,
    .record_after_split = true,
    .no_input_wait = SCHED_NOINPUT_READERS,
    .copy_from_host = true,
};

static const sched_policy policy_async_user_inputs = {
    .name = "async-user-inputs",
    .summary = "BROKEN: events with asynchronous user-input copies (host overwrites inputs)",
    .before_copy = SCHED_GUARD_EVENT,
    .user_copy = SCHED_COPY_ASYNC,
    .input_copy = SCHED_COPY_ASYNC,
    .record_after_split = true,
    .no_input_wait = SCHED_NOINPUT_READERS,
    .copy_from_host = true,
};

static const sched_policy policy_no_split_wait = {
    .name = "no-split-wait",
    .summary = "BROKEN: events, but a split without inputs does not wait for the previous one",
    .before_copy = SCHED_GUARD_EVENT,
    .user_copy = SCHED_COPY_BLOCKING,
    .input_copy = SCHED_COPY_ASYNC,
    .record_after_split = true,
    .no_input_wait = SCHED_NOINPUT_NONE,
    .copy_from_host = true,
};

/* ggml's scheduler at three points of its history (docs/scheduler.md names
 * the pinned ggml commit and what each pull request changed). All three
 * keep ggml's copy slots (ggml_slots): events only with more than one slot,
 * one host copy of each graph input per slot, cur_copy chosen at
 * allocation, four slots when pipelining and one otherwise; and
 * ggml-alloc's allocator (ggml_alloc: in-place reuse of a parent). */

/* ggml before llama.cpp #17795 (ggml 4b496bb9^) and before #26040 (ggml
 * 0ab579a5^, after #25138 reverted #20793): ggml_backend_sched_compute_splits
 * is the same text at both commits, and so is ggml-cuda's refusal of host
 * memory in cpy_tensor_async. A user input: the host waits for the slot's
 * event (else synchronizes the split's backend), then copies blocking; any
 * other input: the split's stream waits for the slot's event (else a
 * synchronize), then cpy_tensor_async, else a sync of both and a blocking
 * copy; no sync around a split; a record only after a split with inputs;
 * no wait before a split without inputs. The baselines the PRs' gains are
 * measured from (`full` is the PR's schematic, not ggml). */
#define GGML_BASELINE_ROW                  \
    .before_copy = SCHED_GUARD_EVENT,      \
    .user_copy = SCHED_COPY_BLOCKING,      \
    .input_copy = SCHED_COPY_ASYNC,        \
    .slot_waiter = SCHED_WAITER_GGML,      \
    .record_after_split = true,            \
    .record_needs_inputs = true,           \
    .no_input_wait = SCHED_NOINPUT_NONE,   \
    .ggml_slots = true,                    \
    .ggml_alloc = true,                    \
    .copies_pipelined = 4,                 \
    .copies_single = 1

/* One row, two names: each baseline is asked for by the PR it precedes. */
static const sched_policy policy_ggml_pre_17795 = {
    .name = "ggml-pre-17795",
    .summary = "ggml before llama.cpp #17795: blocking user copies after the slot event, records after splits with inputs",
    GGML_BASELINE_ROW,
};

static const sched_policy policy_ggml_pre_26040 = {
    .name = "ggml-pre-26040",
    .summary = "ggml before llama.cpp #26040 (after #25138): the scheduler of ggml-pre-17795",
    GGML_BASELINE_ROW,
};

/* llama.cpp #17795 (ggml 4b496bb9): without events a sync before a split's
 * copies and one before its launch, for every split; user inputs copied
 * asynchronously after the host waited for the slot's event; events
 * recorded only after splits with inputs. Under pipeline parallelism an
 * asynchronous copy of a host input may still read it when the host
 * writes it again (reverted with #20463). */
static const sched_policy policy_ggml_17795 = {
    .name = "ggml-17795",
    .summary = "ggml at llama.cpp #17795: async user copies, syncs only without events (races)",
    .sync_before_inputs = true,
    .sync_after_inputs = true,
    .sync_every_split = true,
    .sync_only_without_events = true,
    .before_copy = SCHED_GUARD_EVENT_ONLY,
    .user_copy = SCHED_COPY_ASYNC,
    .input_copy = SCHED_COPY_ASYNC,
    .slot_waiter = SCHED_WAITER_GGML,
    .record_after_split = true,
    .record_needs_inputs = true,
    .no_input_wait = SCHED_NOINPUT_NONE,
    .ggml_slots = true,
    .ggml_alloc = true,
    .copies_pipelined = 4,
    .copies_single = 1,
    .copy_from_host = true,
};

/* llama.cpp #20793 (ggml 5017f360, reverted by #25138): #17795 plus a sync
 * of the split's backend before its copies and before its launch, events
 * or not (saaasg); without a slot event, a sync before each copy into a
 * backend that has no cpy_tensor_async (SYCL). */
static const sched_policy policy_ggml_20793 = {
    .name = "ggml-20793",
    .summary = "ggml at llama.cpp #20793: events, a sync before and after the copies, async user copies",
    .sync_before_inputs = true,
    .sync_after_inputs = true,
    .sync_every_split = true,
    .before_copy = SCHED_GUARD_EVENT_ELSE_SYNC_NO_ASYNC,
    .user_copy = SCHED_COPY_ASYNC,
    .input_copy = SCHED_COPY_ASYNC,
    .slot_waiter = SCHED_WAITER_GGML,
    .record_after_split = true,
    .record_needs_inputs = true,
    .no_input_wait = SCHED_NOINPUT_NONE,
    .ggml_slots = true,
    .ggml_alloc = true,
    .copies_pipelined = 4,
    .copies_single = 1,
    .copy_from_host = true,
};

/* ggml at the pinned commit (after llama.cpp #26040): user inputs copied
 * blocking after the host waited for the slot's event (or synchronized);
 * other inputs after the destination's stream waited for it; an event
 * recorded after every split; a split without inputs blocks the host on
 * the previous backend's event after any change of backend. Who waits for
 * the slot is each row's own: ggml's, or ggml's and the source's. */
#define GGML_HEAD_ROW                           \
    .before_copy = SCHED_GUARD_EVENT,           \
    .user_copy = SCHED_COPY_BLOCKING,           \
    .input_copy = SCHED_COPY_ASYNC,             \
    .record_after_split = true,                 \
    .no_input_wait = SCHED_NOINPUT_ANY_CHANGE,  \
    .ggml_slots = true,                         \
    .ggml_alloc = true,                         \
    .copies_pipelined = 4,                      \
    .copies_single = 1

static const sched_policy policy_ggml_head = {
    .name = "ggml-head",
    .summary = "ggml at the pinned commit (llama.cpp #26040): blocking user copies, a wait after every backend change",
    GGML_HEAD_ROW,
    .slot_waiter = SCHED_WAITER_GGML,
};

/* ggml-head with the fix of its slot-reuse race (docs/ggml-slot-race.md,
 * real/ggml/harness/source-stream-wait.patch): before a non-user input is
 * copied into the slot, the input's backend waits for the slot's event
 * too, since a copy between devices runs on the source's stream. */
static const sched_policy policy_ggml_source_wait = {
    .name = "ggml-source-wait",
    .summary = "ggml-head, and the source's stream waits for the slot too (the slot-reuse race's fix)",
    GGML_HEAD_ROW,
    .slot_waiter = SCHED_WAITER_GGML_SOURCE,
};

/* Broken on purpose: ggml-head, but the MoE ids read back for the
 * used-expert copies are not waited for (no synchronize after the get):
 * the host picks the experts from ids still being copied. */
static const sched_policy policy_moe_no_ids_sync = {
    .name = "moe-no-ids-sync",
    .summary = "broken: ggml-head without the sync after a MoE ids read-back (the host reads ids in flight)",
    GGML_HEAD_ROW,
    .slot_waiter = SCHED_WAITER_GGML,
    .moe_no_ids_sync = true,
};

const sched_policy *const sched_policies[] = {
    &policy_full, &policy_relaxed, &policy_events, &policy_async_user_inputs,
    &policy_no_split_wait, &policy_ggml_pre_17795, &policy_ggml_17795, &policy_ggml_20793,
    &policy_ggml_pre_26040, &policy_ggml_head, &policy_ggml_source_wait, &policy_moe_no_ids_sync,
    NULL,
};

const sched_policy *sched_policy_find(const char *name)
{
    for (int i = 0; sched_policies[i]; i++)
        if (strcmp(sched_policies[i]->name, name) == 0)
            return sched_policies[i];
    return NULL;
}

const char *sched_words(const char *(*word)(int i), char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; word(i) && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s",
                                 i == 0 ? "" : word(i + 1) ? ", " : " or ", word(i));
    return buf;
}

static const char *policy_word(int i) { return sched_policies[i] ? sched_policies[i]->name : NULL; }

const char *sched_policy_names(void)
{
    /* Built once from the table, so a new policy needs no message edits. */
    static char names[512];
    return names[0] ? names : sched_words(policy_word, names, sizeof names);
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

static const char *allreduce_word(int i)
{
    return i < SCHED_ALLREDUCE_COUNT ? allreduce_info[i].word : NULL;
}

const char *sched_allreduce_names(void)
{
    static char names[128];
    return names[0] ? names : sched_words(allreduce_word, names, sizeof names);
}

static const char *const barrier_words[] = {
#define SCHED_BARRIER_WORD(name, word, text) word,
    SCHED_BARRIER_MAP(SCHED_BARRIER_WORD)
#undef SCHED_BARRIER_WORD
};

const char *sched_barrier_str(sched_barrier_kind k)
{
    return (unsigned)k < SCHED_BARRIER_COUNT ? barrier_words[k] : "?";
}

int sched_barrier_parse(const char *word)
{
    for (int i = 0; i < SCHED_BARRIER_COUNT; i++)
        if (strcmp(barrier_words[i], word) == 0)
            return i;
    return -1;
}

static const char *barrier_word(int i) { return i < SCHED_BARRIER_COUNT ? barrier_words[i] : NULL; }

const char *sched_barrier_names(void)
{
    static char names[96];
    return names[0] ? names : sched_words(barrier_word, names, sizeof names);
}
