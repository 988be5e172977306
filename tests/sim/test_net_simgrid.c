/*
 * test_net_simgrid.c -- the SimGrid network engine (sim/net_simgrid.cpp)
 * on the shipped platforms: what one transfer costs, how transfers share a
 * GPU's NVLink or NIC, that next(until) stops at until without drifting,
 * the naming rules and errors; that the same scenarios and workloads take
 * the same time on builtin:4x8, the machine the platform 4x8.xml describes;
 * and that a tapered fabric, which only SimGrid can describe, slows the
 * transfers that share its uplinks.
 *
 * SimGrid runs one simulation per process, so every scenario runs in a
 * child process (fork) that writes its figures into shared memory; the
 * tests assert on them here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#ifndef SYNCSIM_HAVE_SIMGRID
int main(void)
{
    printf("skipped: this build has no SimGrid (install libsimgrid-dev and reconfigure)\n");
    return 77;
}
#else

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/net.h"

/* The shipped platforms' numbers (sim/platforms/README.md). */
#define NVLINK_BYTES_PER_NS 450.0
#define NVLINK_NS 1000
#define NIC_BYTES_PER_NS 50.0
#define NIC_NS 3000
#define BYTES 100000000ull          /* 100 MB */

/* What one run of the scenarios measured, on one network. */
typedef struct figures {
    int rc;                         /* open's result */
    char err[256], describe[160];
    int n_gpus, gpus_per_node;
    int64_t lone_nvlink;            /* gpu0 -> gpu1 alone */
    int64_t into_one[2];            /* gpu0 -> gpu2 and gpu1 -> gpu2 together */
    int64_t out_of_one[2];          /* gpu0 -> gpu1 and gpu0 -> gpu2 together */
    int64_t into_one_back[2];       /* gpu3 -> gpu2 and gpu1 -> gpu2 together */
    int64_t opposite[2];            /* gpu0 -> gpu1 and gpu1 -> gpu0 together */
    int64_t nic_opposite[2];        /* gpu0 -> gpu16 and gpu16 -> gpu0 together */
    int64_t lone_nic;               /* gpu0 -> gpu8 alone */
    int64_t nic_into_one[2];        /* gpu0 -> gpu16 and gpu8 -> gpu16 together */
    int64_t mixed[2];               /* gpu0 -> gpu1 (NVLink) and gpu0 -> gpu8 (NIC) together */
    bool stopped_at_until;          /* next(start + 1000) returned false at once */
    int64_t lone_after_until;       /* the lone NVLink transfer, waited for in slices */
    int second_rc;                  /* a second open in the same process */
    char second_err[256];
    uint64_t busiest_bytes;
    char busiest[64];
} figures;

static int64_t now;

/* Starts the transfers (src[i] -> dst[i]) together and fills took[i] with
 * how long each took. */
static void together(sim_net *n, int count, const int *src, const int *dst, int64_t *took)
{
    int64_t ids[4], t0 = now;
    for (int i = 0; i < count; i++)
        ids[i] = n->iface->start(n, now, src[i], dst[i], BYTES);
    for (int left = count; left > 0; left--) {
        int64_t at = -1, id = -1;
        if (!n->iface->next(n, INT64_MAX, &at, &id))
            return;
        for (int i = 0; i < count; i++)
            if (ids[i] == id)
                took[i] = at - t0;
        now = at;
    }
}

typedef struct job {
    sim_net *net;
    figures *f;
} job;

static int body(void *arg)
{
    job *j = arg;
    sim_net *n = j->net;
    figures *f = j->f;
    together(n, 1, (int[]){ 0 }, (int[]){ 1 }, &f->lone_nvlink);
    together(n, 2, (int[]){ 0, 1 }, (int[]){ 2, 2 }, f->into_one);
    together(n, 2, (int[]){ 0, 0 }, (int[]){ 1, 2 }, f->out_of_one);
    together(n, 2, (int[]){ 3, 1 }, (int[]){ 2, 2 }, f->into_one_back);
    together(n, 2, (int[]){ 0, 1 }, (int[]){ 1, 0 }, f->opposite);
    together(n, 2, (int[]){ 0, 16 }, (int[]){ 16, 0 }, f->nic_opposite);
    together(n, 1, (int[]){ 0 }, (int[]){ 8 }, &f->lone_nic);
    together(n, 2, (int[]){ 0, 8 }, (int[]){ 16, 16 }, f->nic_into_one);
    together(n, 2, (int[]){ 0, 0 }, (int[]){ 1, 8 }, f->mixed);

    /* The same lone transfer, waited for 1000 ns at a time. */
    int64_t t0 = now, at = -1, id = -1, until = now;
    n->iface->start(n, now, 0, 1, BYTES);
    f->stopped_at_until = !n->iface->next(n, now + 1000, &at, &id);
    for (;;) {
        until += 1000;
        if (n->iface->next(n, until, &at, &id))
            break;
    }
    f->lone_after_until = at - t0;
    now = at;
    return 0;
}

/* Opens the network of spec in a child process, runs the scenarios there
 * when asked, and returns what the child measured (shared memory). */
static figures *measure(const char *spec, bool run)
{
    figures *f = mmap(NULL, sizeof *f, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(f != MAP_FAILED);
    memset(f, 0, sizeof *f);
    f->rc = -2;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sim_net n;
        f->rc = sim_net_open(&n, spec, f->err, sizeof f->err);
        if (f->rc == 0) {
            f->n_gpus = n.n_gpus;
            f->gpus_per_node = n.gpus_per_node;
            snprintf(f->describe, sizeof f->describe, "%s", n.describe);
            if (run) {
                now = 0;
                job j = { &n, f };
                if (n.iface->run)
                    n.iface->run(&n, body, &j);
                else
                    body(&j);
                if (n.iface->busiest)
                    f->busiest_bytes = n.iface->busiest(&n, f->busiest, sizeof f->busiest);
            }
            sim_net other;
            f->second_rc = sim_net_open(&other, spec, f->second_err, sizeof f->second_err);
            if (f->second_rc == 0)
                sim_net_close(&other);
            sim_net_close(&n);
        }
        fflush(NULL);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    return f;
}

static figures *on_4x8, *on_builtin;

static int setup(void **state)
{
    (void)state;
    on_4x8 = measure("simgrid:4x8.xml", true);
    if (on_4x8->rc != 0)
        return fprintf(stderr, "open simgrid:4x8.xml: %s\n", on_4x8->err), -1;
    on_builtin = measure("builtin:4x8", true);
    if (on_builtin->rc != 0)
        return fprintf(stderr, "open builtin:4x8: %s\n", on_builtin->err), -1;
    return 0;
}

static int64_t alone(double bytes_per_ns, int64_t latency)
{
    return latency + (int64_t)(BYTES / bytes_per_ns + 0.5);
}

/* Within 1 ns + 0.01 %: SimGrid's solver works in doubles. */
static void assert_about(int64_t got, int64_t want)
{
    int64_t slack = 1 + want / 10000;
    if (got < want - slack || got > want + slack)
        fail_msg("took %lld ns, expected %lld +- %lld", (long long)got, (long long)want,
                 (long long)slack);
}

static void test_simgrid_4x8_is_4_nodes_of_8_gpus_node_major(void **state)
{
    (void)state;
    assert_int_equal(on_4x8->n_gpus, 32);
    assert_int_equal(on_4x8->gpus_per_node, 8);
    assert_non_null(strstr(on_4x8->describe, "4 nodes x 8 GPUs"));
}

static void test_simgrid_shipped_platforms_have_their_shapes(void **state)
{
    (void)state;
    static const struct { const char *name; int gpus, per; } shipped[] = {
        { "1x8.xml", 8, 8 }, { "4x8", 32, 8 }, { "128x8.xml", 1024, 8 },
        { "4x8-taper4.xml", 32, 8 },
    };
    for (size_t i = 0; i < sizeof shipped / sizeof *shipped; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "simgrid:%s", shipped[i].name);
        figures *f = measure(spec, false);
        if (f->rc != 0)
            fail_msg("%s: %s", shipped[i].name, f->err);
        assert_int_equal(f->n_gpus, shipped[i].gpus);
        assert_int_equal(f->gpus_per_node, shipped[i].per);
        munmap(f, sizeof *f);
    }
}

static void test_simgrid_lone_transfer_takes_latency_plus_bytes_over_bandwidth(void **state)
{
    (void)state;
    assert_about(on_4x8->lone_nvlink, alone(NVLINK_BYTES_PER_NS, NVLINK_NS));
    assert_about(on_4x8->lone_nic, alone(NIC_BYTES_PER_NS, NIC_NS));
}

static void test_simgrid_two_transfers_into_one_gpu_share_its_nvlink(void **state)
{
    (void)state;
    int64_t want = alone(NVLINK_BYTES_PER_NS / 2, NVLINK_NS);
    assert_about(on_4x8->into_one[0], want);
    assert_about(on_4x8->into_one[1], want);
    assert_about(on_4x8->out_of_one[0], want);
    assert_about(on_4x8->out_of_one[1], want);
    assert_about(on_4x8->into_one_back[0], want);
    assert_about(on_4x8->into_one_back[1], want);
}

static void test_simgrid_links_are_full_duplex(void **state)
{
    (void)state;
    int64_t nvlink = alone(NVLINK_BYTES_PER_NS, NVLINK_NS), nic = alone(NIC_BYTES_PER_NS, NIC_NS);
    assert_about(on_4x8->opposite[0], nvlink);
    assert_about(on_4x8->opposite[1], nvlink);
    assert_about(on_4x8->nic_opposite[0], nic);
    assert_about(on_4x8->nic_opposite[1], nic);
}

static void test_simgrid_cross_node_transfer_is_limited_by_the_nic(void **state)
{
    (void)state;
    assert_true(on_4x8->lone_nic > 8 * on_4x8->lone_nvlink);
    int64_t want = alone(NIC_BYTES_PER_NS / 2, NIC_NS);
    assert_about(on_4x8->nic_into_one[0], want);
    assert_about(on_4x8->nic_into_one[1], want);
    /* NVLink and NIC are different links: neither slows the other. */
    assert_about(on_4x8->mixed[0], alone(NVLINK_BYTES_PER_NS, NVLINK_NS));
    assert_about(on_4x8->mixed[1], alone(NIC_BYTES_PER_NS, NIC_NS));
}

static void test_simgrid_next_stops_at_until_without_drift(void **state)
{
    (void)state;
    assert_true(on_4x8->stopped_at_until);
    assert_int_equal(on_4x8->lone_after_until, on_4x8->lone_nvlink);
}

static void test_simgrid_busiest_link_is_gpu0s_nvlink_up(void **state)
{
    (void)state;
    /* gpu0 sent 7 of the 14 NVLink transfers; gpu2 received 5. */
    assert_string_equal(on_4x8->busiest, "gpu0-nvlink_UP");
    assert_true(on_4x8->busiest_bytes == 7 * BYTES);
}

static void test_simgrid_second_open_in_a_process_says_why_it_fails(void **state)
{
    (void)state;
    assert_int_equal(on_4x8->second_rc, -1);
    assert_non_null(strstr(on_4x8->second_err, "one simulation per process"));
}

static void test_simgrid_bad_spec_says_what_is_wrong(void **state)
{
    (void)state;
    figures *f = measure("simgrid:no-such-platform.xml", false);
    assert_int_equal(f->rc, -1);
    assert_non_null(strstr(f->err, "no platform 'no-such-platform.xml'"));
    assert_non_null(strstr(f->err, "4x8.xml"));
    munmap(f, sizeof *f);
    f = measure("simgrid:4x8.xml,colour=blue", false);
    assert_int_equal(f->rc, -1);
    assert_non_null(strstr(f->err, "unknown option 'colour=blue'"));
    munmap(f, sizeof *f);
    f = measure("simgrid:4x8.xml,model=XX", false);
    assert_int_equal(f->rc, -1);
    assert_non_null(strstr(f->err, "unknown network model 'XX'"));
    munmap(f, sizeof *f);
    f = measure("simgrid:4x8.xml,cfg=network/no-such-key:1", false);
    assert_int_equal(f->rc, -1);
    assert_non_null(strstr(f->err, "network/no-such-key"));
    munmap(f, sizeof *f);
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void test_simgrid_platform_not_node_major_is_refused(void **state)
{
    (void)state;
    char path[] = "/tmp/syncsim-platform-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    /* gpu1 and gpu2 swapped: node a holds gpu0 and gpu2. */
    write_file(path,
               "<?xml version='1.0'?>\n"
               "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
               "<platform version=\"4.1\"><zone id=\"top\" routing=\"Full\">\n"
               " <zone id=\"a\" routing=\"Full\"><host id=\"gpu0\" speed=\"1f\"/>"
               "<host id=\"gpu2\" speed=\"1f\"/></zone>\n"
               " <zone id=\"b\" routing=\"Full\"><host id=\"gpu1\" speed=\"1f\"/>"
               "<host id=\"gpu3\" speed=\"1f\"/></zone>\n"
               "</zone></platform>\n");
    char spec[64];
    snprintf(spec, sizeof spec, "simgrid:%s", path);
    figures *f = measure(spec, false);
    assert_int_equal(f->rc, -1);
    assert_non_null(strstr(f->err, "not node-major"));
    munmap(f, sizeof *f);
    write_file(path, "<?xml version='1.0'?>\n<platform version=\"4.1\"><zone id=\"x\"\n");
    f = measure(spec, false);
    assert_int_equal(f->rc, -1);
    assert_non_null(strstr(f->err, path));
    munmap(f, sizeof *f);
    unlink(path);
}

/* Within 1 ns + 0.1 %: both compute max-min fair shares, in doubles here
 * and in integer ns there. */
static void assert_same(const char *what, int64_t simgrid, int64_t builtin)
{
    int64_t slack = 1 + builtin / 1000;
    if (simgrid < builtin - slack || simgrid > builtin + slack)
        fail_msg("%s: simgrid %lld ns, builtin %lld ns (+- %lld)", what, (long long)simgrid,
                 (long long)builtin, (long long)slack);
}

static void test_simgrid_and_builtin_agree_on_the_same_machine(void **state)
{
    (void)state;
    const figures *s = on_4x8, *b = on_builtin;
    assert_same("lone NVLink", s->lone_nvlink, b->lone_nvlink);
    assert_same("lone NIC", s->lone_nic, b->lone_nic);
    assert_same("after until", s->lone_after_until, b->lone_after_until);
    for (int i = 0; i < 2; i++) {
        assert_same("into one", s->into_one[i], b->into_one[i]);
        assert_same("out of one", s->out_of_one[i], b->out_of_one[i]);
        assert_same("into one, back", s->into_one_back[i], b->into_one_back[i]);
        assert_same("opposite", s->opposite[i], b->opposite[i]);
        assert_same("NIC opposite", s->nic_opposite[i], b->nic_opposite[i]);
        assert_same("NIC into one", s->nic_into_one[i], b->nic_into_one[i]);
        assert_same("NVLink and NIC", s->mixed[i], b->mixed[i]);
    }
}

/* `syncsim cluster ... --json`'s time_ns for one workload on one network. */
static int64_t cluster_time(const char *net, const char *workload)
{
    char cmd[512], out[4096] = "";
    snprintf(cmd, sizeof cmd, "%s cluster --network %s --workload %s --json 2>&1", SYNCSIM_BINARY,
             net, workload);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    int rc = pclose(p);
    const char *t = strstr(out, "\"time_ns\":");
    if (rc != 0 || !t)
        fail_msg("%s: exit %d: %s", cmd, rc, out);
    return strtoll(t + 10, NULL, 10);
}

static void test_simgrid_and_builtin_agree_on_whole_workloads(void **state)
{
    (void)state;
    static const char *const workloads[] = {
        "allreduce:bytes=16M",
        "allreduce:bytes=16M,group=rail",
        "allreduce:bytes=16M,channels=1",
        "step:tp=8,pp=4,dp=1,microbatches=4,seq=1024,model=llama:n_layer=8",
    };
    for (size_t i = 0; i < sizeof workloads / sizeof *workloads; i++)
        assert_same(workloads[i], cluster_time("simgrid:4x8.xml", workloads[i]),
                    cluster_time("builtin:4x8", workloads[i]));
}

static void test_simgrid_tapered_fabric_shares_the_uplink(void **state)
{
    (void)state;
    /* Eight rail rings leave every node through its one uplink of 8 x 50 / 4
     * GB/s: each ring gets a quarter of a NIC; the built-in network, non-
     * blocking by construction, gives each its whole NIC. */
    const char *w = "allreduce:bytes=256M,group=rail";
    int64_t tapered = cluster_time("simgrid:4x8-taper4.xml", w);
    int64_t open = cluster_time("simgrid:4x8.xml", w);
    assert_same("non-blocking", open, cluster_time("builtin:4x8", w));
    if (tapered < 39 * open / 10 || tapered > 4 * open)
        fail_msg("tapered %lld ns, non-blocking %lld ns: expected about 4x", (long long)tapered,
                 (long long)open);
    /* The same over every GPU with NCCL's channels, a ring per NIC: eight
     * flows leave each node at a time. */
    w = "allreduce:bytes=256M";
    tapered = cluster_time("simgrid:4x8-taper4.xml", w);
    open = cluster_time("simgrid:4x8.xml", w);
    if (tapered < 3 * open)
        fail_msg("8 channels: tapered %lld ns, non-blocking %lld ns: expected about 4x",
                 (long long)tapered, (long long)open);
    /* One ring crosses each uplink with one flow: no change. */
    assert_same("one ring", cluster_time("simgrid:4x8-taper4.xml", "allreduce:bytes=16M,channels=1"),
                cluster_time("simgrid:4x8.xml", "allreduce:bytes=16M,channels=1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simgrid_4x8_is_4_nodes_of_8_gpus_node_major),
        cmocka_unit_test(test_simgrid_shipped_platforms_have_their_shapes),
        cmocka_unit_test(test_simgrid_lone_transfer_takes_latency_plus_bytes_over_bandwidth),
        cmocka_unit_test(test_simgrid_two_transfers_into_one_gpu_share_its_nvlink),
        cmocka_unit_test(test_simgrid_links_are_full_duplex),
        cmocka_unit_test(test_simgrid_cross_node_transfer_is_limited_by_the_nic),
        cmocka_unit_test(test_simgrid_next_stops_at_until_without_drift),
        cmocka_unit_test(test_simgrid_busiest_link_is_gpu0s_nvlink_up),
        cmocka_unit_test(test_simgrid_second_open_in_a_process_says_why_it_fails),
        cmocka_unit_test(test_simgrid_bad_spec_says_what_is_wrong),
        cmocka_unit_test(test_simgrid_platform_not_node_major_is_refused),
        cmocka_unit_test(test_simgrid_and_builtin_agree_on_the_same_machine),
        cmocka_unit_test(test_simgrid_and_builtin_agree_on_whole_workloads),
        cmocka_unit_test(test_simgrid_tapered_fabric_shares_the_uplink),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
#endif
