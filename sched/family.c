/*
 * family.c -- backend families: how a --devices spec names devices.
 *
 * A spec is items separated by commas. An item is WORD[:ARG]: WORD names
 * a family (its name, or whatever its claims() accepts: a device model's
 * name or file), ARG is the family's (a count, gpus=N). A KEY=VALUE word
 * belongs to the item before it ("cpustream:2,jitter=200us,seed=7,cpu").
 * Every item of a spec must be of one machine (a simulated one, or this
 * computer): the first item's family checks and opens that machine for
 * all of them. Families come from one table (cli/run_families.c); what a
 * spec may say, in help and in errors, is listed from it.
 */
#include "sched.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const sched_family *sched_family_find(const sched_family *const *families, const char *word)
{
    for (int i = 0; families[i]; i++) {
        const sched_family *f = families[i];
        if (f->iface->claims ? f->iface->claims(f, word) : strcmp(word, f->iface->name) == 0)
            return f;
    }
    return NULL;
}

/* "cpustream[:N], cpu or MODEL[:gpus=N] (h100-pcie, ...)" from the table. */
static void expected(const sched_family *const *families, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; families[i] && used < cap; i++) {
        const sched_family_iface *f = families[i]->iface;
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i == 0 ? "" : families[i + 1] ? ", " : " or ",
                                 f->syntax);
        if (f->list && used < cap) {
            char names[256];
            f->list(families[i], names, sizeof names);
            if (names[0])
                used += (size_t)snprintf(buf + used, cap - used, " (%s)", names);
        }
    }
}

int sched_spec_parse(const char *text, const sched_family *const *families, sched_spec *out,
                     trace_error *err)
{
    memset(out, 0, sizeof *out);
    if (!text || !*text)
        return trace_error_set(err, TRACE_EUSAGE, "devices '': empty (expected a device model or "
                               "real devices)"), -1;
    if (strlen(text) >= sizeof out->text)
        return trace_error_set(err, TRACE_EUSAGE, "devices '%.40s...': longer than %zu characters",
                               text, sizeof out->text - 1), -1;
    snprintf(out->text, sizeof out->text, "%s", text);
    char copy[sizeof out->text];
    snprintf(copy, sizeof copy, "%s", text);
    char *save = NULL;
    int words = 0;
    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save), words++) {
        char *eq = strchr(w, '='), *colon = strchr(w, ':');
        if (eq && (!colon || eq < colon)) {
            /* KEY=VALUE of the item before it. */
            *eq = '\0';
            if (out->n_items == 0)
                return trace_error_set(err, TRACE_EUSAGE, "devices '%s': option '%s' before any "
                                       "device", text, w), -1;
            sched_spec_item *it = &out->item[out->n_items - 1];
            if (it->n_opt == SCHED_SPEC_MAX_OPTS || strlen(w) >= sizeof it->opt[0].key ||
                strlen(eq + 1) >= sizeof it->opt[0].value)
                return trace_error_set(err, TRACE_EUSAGE, "devices '%s': too many or too long "
                                       "options after '%s'", text, it->word), -1;
            snprintf(it->opt[it->n_opt].key, sizeof it->opt[0].key, "%s", w);
            snprintf(it->opt[it->n_opt].value, sizeof it->opt[0].value, "%s", eq + 1);
            it->n_opt++;
            continue;
        }
        if (out->n_items == SCHED_SPEC_MAX_ITEMS)
            return trace_error_set(err, TRACE_EUSAGE, "devices '%s': more than %d items", text,
                                   SCHED_SPEC_MAX_ITEMS), -1;
        sched_spec_item *it = &out->item[out->n_items];
        if (colon)
            *colon = '\0';
        if (strlen(w) >= sizeof it->word || (colon && strlen(colon + 1) >= sizeof it->arg))
            return trace_error_set(err, TRACE_EUSAGE, "devices '%s': item '%.40s' is too long",
                                   text, w), -1;
        snprintf(it->word, sizeof it->word, "%s", w);
        if (colon)
            snprintf(it->arg, sizeof it->arg, "%s", colon + 1);
        it->family = sched_family_find(families, it->word);
        if (!it->family) {
            char exp[768];
            expected(families, exp, sizeof exp);
            return trace_error_set(err, TRACE_EUSAGE, "devices '%s': unknown device '%s' "
                                   "(expected %s)", text, it->word, exp), -1;
        }
        const sched_family *first = out->item[0].family;
        if (out->n_items > 0 && strcmp(first->iface->machine, it->family->iface->machine) != 0)
            return trace_error_set(err, TRACE_EUSAGE, "devices '%s': '%s' (%s) and '%s' (%s) "
                                   "cannot run in one machine", text, out->item[0].word,
                                   first->iface->machine, it->word,
                                   it->family->iface->machine), -1;
        out->n_items++;
    }
    if (out->n_items == 0 || words == 0)
        return trace_error_set(err, TRACE_EUSAGE, "devices '%s': no device", text), -1;
    return 0;
}

/* ------------------------------------------------------------------ */
/* ggml backend families: how each copies a split input (the pinned ggml
 * commit's cpy_tensor_async of each backend, docs/scheduler.md). */

const sched_copy_traits sched_copy_families[] = {
    { "cuda", SCHED_XFER_SOURCE, SCHED_XFER_DEST, true,
      "peer copies on the source's stream and an event; from host memory asynchronous only "
      "with copy_from_host (#17795, #20793), else blocking" },
    { "vulkan", SCHED_XFER_BLOCKING, SCHED_XFER_DEST, false,
      "pulls from pinned host memory asynchronously; copies between devices blocking" },
    { "sycl", SCHED_XFER_BLOCKING, SCHED_XFER_BLOCKING, false,
      "no cpy_tensor_async: every copy blocking; an event wait blocks the host", true, true },
    { "metal", SCHED_XFER_SOURCE, SCHED_XFER_BLOCKING, false,
      "copies between devices on the source's queue and an event; from host memory blocking" },
    { "cpu", SCHED_XFER_BLOCKING, SCHED_XFER_BLOCKING, false,
      "synchronous: the host copies", true },
    { "noasync", SCHED_XFER_BLOCKING, SCHED_XFER_BLOCKING, false,
      "a stream with events and no cpy_tensor_async: every copy blocking", true },
    { NULL, 0, 0, false, NULL, false, false },
};

const sched_copy_traits *sched_copy_family(const char *name)
{
    for (int i = 0; sched_copy_families[i].family; i++)
        if (strcmp(sched_copy_families[i].family, name) == 0)
            return &sched_copy_families[i];
    return NULL;
}

static const char *family_word(int i) { return sched_copy_families[i].family; }

const char *sched_copy_family_names(void)
{
    static char names[128];
    return names[0] ? names : sched_words(family_word, names, sizeof names);
}

void sched_plugin_path(const char *name, const char *env_dir, char *out, size_t cap)
{
    const char *env = env_dir ? getenv(env_dir) : NULL;
    char self[PATH_MAX];
    ssize_t n;
    if (env && *env) {
        snprintf(out, cap, "%s/%s", env, name);
    } else if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) > 0) {
        self[n] = '\0';
        const char *dir = dirname(self);
        /* beside the binary; installed; beside a build tree's tests/ */
        static const char *const where[] = { "%s/lib/%s", "%s/../lib/syncsim/%s", "%s/../lib/%s" };
        for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
            snprintf(out, cap, where[i], dir, name);
            if (access(out, R_OK) == 0)
                break;
        }
    } else {
        snprintf(out, cap, "%s", name);
    }
}

void sched_data_path(const char *rel, const char *fallback, char *out, size_t cap)
{
    const char *env = getenv("SYNCSIM_DATA_DIR");
    if (env && *env) {
        snprintf(out, cap, "%s/%s", env, rel);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        const char *dir = dirname(exe);
        static const char *const where[] = { "%s/../share/syncsim/%s", "%s/share/syncsim/%s" };
        for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
            snprintf(out, cap, where[i], dir, rel);
            if (access(out, F_OK) == 0)
                return;
        }
    }
    snprintf(out, cap, "%s", fallback);
}
