/* test_cluster.c -- the cluster network (sim/net.c, sim/net_builtin.c) and
 * the cluster simulator (sim/cluster.c): transfers take latency + bytes /
 * bandwidth and share the links they cross; a ring all-reduce is 2(n-1)
 * steps of chunk transfers; a pipeline's bubble follows (P-1)/(M+P-1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sim/cluster.h"

static void open_net(sim_net *n, const char *spec)
{
    char err[256];
    if (sim_net_open(n, spec, err, sizeof err) != 0)
        fail_msg("%s: %s", spec, err);
}

/* Completes every transfer in flight; done[id] gets each one's end. */
static int drain(sim_net *n, int64_t *done, int max)
{
    int64_t at, id;
    int k = 0;
    while (n->iface->next(n, INT64_MAX, &at, &id)) {
        assert_true(id >= 0 && id < max);
        done[id] = at;
        k++;
    }
    return k;
}

static void test_cluster_lone_transfer_takes_latency_plus_bytes_over_bandwidth(void **state)
{
    (void)state;
    sim_net n;
    open_net(&n, "builtin:2x2");
    assert_int_equal(n.n_gpus, 4);
    assert_int_equal(n.gpus_per_node, 2);
    int64_t done[4] = { -1, -1, -1, -1 };
    /* inside a node: NVLink, 450 GB/s after 1000 ns */
    int64_t a = n.iface->start(&n, 0, 0, 1, 9000000);
    assert_int_equal(drain(&n, done, 4), 1);
    assert_int_equal(done[a], 1000 + sim_cost_transfer_ns(9000000, 450));
    /* across nodes: the NICs, 50 GB/s after 3000 ns, from the network's clock on */
    int64_t t0 = done[a];
    int64_t b = n.iface->start(&n, t0, 1, 2, 9000000);
    assert_int_equal(drain(&n, done, 4), 1);
    assert_int_equal(done[b], t0 + 3000 + sim_cost_transfer_ns(9000000, 50));
    sim_net_close(&n);

    /* the keys change the numbers */
    open_net(&n, "builtin:1x2,nvlink_gbps=100,nvlink_ns=0");
    a = n.iface->start(&n, 0, 1, 0, 1000000);
    assert_int_equal(drain(&n, done, 4), 1);
    assert_int_equal(done[a], sim_cost_transfer_ns(1000000, 100));
    sim_net_close(&n);
}

static void test_cluster_two_transfers_into_one_gpu_share_its_link(void **state)
{
    (void)state;
    sim_net n;
    open_net(&n, "builtin:1x4,nvlink_ns=0");
    int64_t done[4] = { -1, -1, -1, -1 };
    int64_t a = n.iface->start(&n, 0, 0, 2, 4500000);
    int64_t b = n.iface->start(&n, 0, 1, 2, 4500000);
    assert_int_equal(drain(&n, done, 4), 2);
    /* both into GPU 2's NVLink down: half its bandwidth each */
    assert_int_equal(done[a], sim_cost_transfer_ns(2 * 4500000, 450));
    assert_int_equal(done[b], done[a]);
    /* disjoint pairs share nothing: each at the full bandwidth */
    a = n.iface->start(&n, done[b], 0, 1, 4500000);
    b = n.iface->start(&n, done[b], 2, 3, 4500000);
    int64_t t0 = done[b];
    assert_int_equal(drain(&n, done, 4), 2);
    assert_int_equal(done[a], t0 + sim_cost_transfer_ns(4500000, 450));
    assert_int_equal(done[b], done[a]);
    sim_net_close(&n);

    /* across nodes the NIC of the receiver is shared, the NVLinks are not used */
    open_net(&n, "builtin:3x1,nic_ns=0");
    a = n.iface->start(&n, 0, 0, 2, 5000000);
    b = n.iface->start(&n, 0, 1, 2, 5000000);
    assert_int_equal(drain(&n, done, 4), 2);
    assert_int_equal(done[a], sim_cost_transfer_ns(2 * 5000000, 50));
    char name[96];
    assert_int_equal(n.iface->busiest(&n, name, sizeof name), 10000000);
    assert_string_equal(name, "gpu2.nic.down (node 2)");
    sim_net_close(&n);
}

static void test_cluster_network_specs_are_checked(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *says;
    } bad[] = {
        { "builtin:4", "expected NODESxGPUS" },
        { "builtin:0x8", "expected NODESxGPUS" },
        { "builtin:4x8,nic_gbps=-1", "'nic_gbps' needs a positive number" },
        { "builtin:4x8,speed=3", "unknown key 'speed'" },
        { "ethernet:4x8", "unknown engine 'ethernet'" },
        { "4x8", "engines here: builtin" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sim_net n;
        char err[256] = "";
        assert_int_equal(sim_net_open(&n, bad[i].spec, err, sizeof err), -1);
        if (!strstr(err, bad[i].says))
            fail_msg("%s: '%s' does not say '%s'", bad[i].spec, err, bad[i].says);
    }
    assert_non_null(strstr(sim_net_engines(), "builtin"));
#ifndef SYNCSIM_HAVE_SIMGRID
    sim_net n;
    char err[256] = "";
    assert_int_equal(sim_net_open(&n, "simgrid:x.xml", err, sizeof err), -1);
    assert_non_null(strstr(err, "built without SimGrid"));
#endif
}

static sim_model model;

static int load_model(void **state)
{
    (void)state;
    trace_error err = { 0 };
    return sim_model_load("h100-sxm", &model, &err);
}

static void run(const char *network, const char *workload, sim_cluster_result *r)
{
    sim_net n;
    open_net(&n, network);
    sim_cluster_opts o = { .workload = workload, .model = &model };
    char err[256];
    if (sim_cluster_run(&n, &o, r, err, sizeof err) != 0)
        fail_msg("%s on %s: %s", workload, network, err);
    sim_net_close(&n);
}

static void test_cluster_ring_allreduce_is_2n_minus_2_chunk_steps(void **state)
{
    (void)state;
    sim_cluster_result r;
    run("builtin:1x8", "allreduce:bytes=8M", &r);
    /* each step: the model's step overhead, NVLink latency, a chunk of B/8
     * alone on its links; the base once */
    int64_t step = model.allreduce_step_ns + 1000 + sim_cost_transfer_ns((8u << 20) / 8, 450);
    assert_int_equal(r.time_ns, model.allreduce_base_ns + 14 * step);
    assert_int_equal(r.transfers, 8 * 14);
    assert_int_equal(r.group_size, 8);
}

static void test_cluster_ring_busbw_approaches_nvlink_for_large_messages(void **state)
{
    (void)state;
    sim_cluster_result big, small;
    run("builtin:1x8", "allreduce:bytes=4G", &big);
    run("builtin:1x8", "allreduce:bytes=64K", &small);
    assert_true(big.busbw_gbps > 0.97 * 450 && big.busbw_gbps <= 450);
    assert_true(small.busbw_gbps < 0.25 * 450);
    assert_true(big.busbw_gbps / big.algbw_gbps > 1.74 && big.busbw_gbps / big.algbw_gbps < 1.76);
    /* across nodes the NICs are the bottleneck: busbw near 50 GB/s */
    sim_cluster_result ib;
    run("builtin:4x8", "allreduce:bytes=1G,group=rail", &ib);
    assert_int_equal(ib.group_size, 4);
    assert_int_equal(ib.n_groups, 8);
    assert_true(ib.busbw_gbps > 0.95 * 50 && ib.busbw_gbps <= 50);
    assert_non_null(strstr(ib.busiest, ".nic."));
    /* one ring over 4 nodes leaves each node through one NIC; NCCL's channels
     * (one ring per GPU of a node, the default) through all 8 */
    sim_cluster_result one, eight;
    run("builtin:4x8", "allreduce:bytes=1G,channels=1", &one);
    run("builtin:4x8", "allreduce:bytes=1G", &eight);
    assert_int_equal(one.channels, 1);
    assert_int_equal(eight.channels, 8);
    assert_true(one.busbw_gbps > 0.95 * 50 && one.busbw_gbps <= 50);
    assert_true(eight.busbw_gbps > 6 * 50 && eight.busbw_gbps <= 8 * 50);
}

static void test_cluster_pipeline_bubble_follows_the_formula(void **state)
{
    (void)state;
    static const struct {
        int pp, mb;
    } cases[] = { { 4, 8 }, { 4, 4 }, { 2, 8 } };
    for (size_t k = 0; k < 2 * sizeof cases / sizeof cases[0]; k++) {
        size_t i = k / 2;
        const char *schedule = k % 2 ? "1f1b" : "gpipe";
        char net[64], w[160];
        /* the formula counts no communication: a network that costs next to nothing */
        snprintf(net, sizeof net, "builtin:%dx1,nic_gbps=100000,nic_ns=0", cases[i].pp);
        snprintf(w, sizeof w, "step:tp=1,pp=%d,dp=1,microbatches=%d,seq=2048,schedule=%s,"
                 "model=llama:n_layer=16,n_embd=4096,n_ff=14336,n_head=32,n_kv_head=8",
                 cases[i].pp, cases[i].mb, schedule);
        sim_cluster_result r;
        run(net, w, &r);
        double ideal = (double)(cases[i].pp - 1) / (cases[i].mb + cases[i].pp - 1);
        assert_true(r.ideal_bubble == ideal);
        if (r.bubble < ideal - 0.005 || r.bubble > ideal + 0.03)
            fail_msg("%s pp=%d M=%d: bubble %.4f, ideal %.4f", schedule, cases[i].pp,
                     cases[i].mb, r.bubble, ideal);
    }
    /* more microbatches, less bubble; 1f1b no worse than gpipe */
    sim_cluster_result g8, g32, f8;
    const char *model_keys = "model=llama:n_layer=16,n_embd=4096,n_head=32,n_kv_head=8";
    char w[200];
    snprintf(w, sizeof w, "step:tp=1,pp=4,dp=1,microbatches=8,seq=2048,schedule=gpipe,%s",
             model_keys);
    run("builtin:4x1", w, &g8);
    snprintf(w, sizeof w, "step:tp=1,pp=4,dp=1,microbatches=32,seq=2048,schedule=gpipe,%s",
             model_keys);
    run("builtin:4x1", w, &g32);
    snprintf(w, sizeof w, "step:tp=1,pp=4,dp=1,microbatches=8,seq=2048,schedule=1f1b,%s",
             model_keys);
    run("builtin:4x1", w, &f8);
    assert_true(g32.bubble < g8.bubble);
    assert_true(f8.bubble <= g8.bubble + 0.01);
    assert_true(f8.compute_ns == g8.compute_ns);
}

static void test_cluster_step_tp_and_dp_communicate(void **state)
{
    (void)state;
    sim_cluster_result r1, r2;
    const char *m = "model=llama:n_layer=4,n_embd=2048,n_ff=8192,n_head=16,n_kv_head=4";
    char w[200];
    snprintf(w, sizeof w, "step:tp=4,pp=2,dp=2,microbatches=4,seq=1024,%s", m);
    run("builtin:2x8", w, &r1);
    /* the dp all-reduce comes after the last kernel */
    assert_true(r1.time_ns > r1.pipeline_ns);
    assert_true(r1.comm_ns > 0 && r1.compute_ns > 0);
    /* tensor parallelism halves the kernels, and pays in all-reduces */
    snprintf(w, sizeof w, "step:tp=8,pp=2,dp=1,microbatches=4,seq=1024,%s", m);
    run("builtin:2x8", w, &r2);
    assert_true(r2.compute_ns < r1.compute_ns);
    /* a slower NVLink makes the same step slower */
    sim_cluster_result slow;
    run("builtin:2x8,nvlink_gbps=45", w, &slow);
    assert_true(slow.time_ns > r2.time_ns);
    assert_true(slow.compute_ns == r2.compute_ns);
}

static void test_cluster_workloads_are_checked(void **state)
{
    (void)state;
    static const struct {
        const char *network, *workload, *says;
    } bad[] = {
        { "builtin:2x8", "step:tp=8,pp=4,dp=1,microbatches=4,seq=8", "= 32 GPUs, but the network "
                                                                     "has 16" },
        { "builtin:4x4", "step:tp=8,pp=2,dp=1,microbatches=4,seq=8", "must divide the 4 GPUs" },
        { "builtin:2x8", "step:tp=8,pp=2,dp=1,seq=8", "microbatches= is required" },
        { "builtin:2x8", "step:tp=8,pp=2,dp=1,microbatches=4,seq=8,schedule=zb", "bad value 'zb'" },
        { "builtin:2x8", "step:tp=8,pp=2,dp=1,microbatches=4,seq=8,model=gpt", "model 'gpt'" },
        { "builtin:2x8", "allreduce:group=all", "bytes= is required" },
        { "builtin:2x8", "allreduce:bytes=1M,group=ring", "bad value 'ring' for group" },
        { "builtin:1x8", "allreduce:bytes=1M,group=rail", "groups of 1 GPU" },
        { "builtin:2x8", "broadcast:bytes=1M", "unknown kind 'broadcast'" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sim_net n;
        open_net(&n, bad[i].network);
        sim_cluster_opts o = { .workload = bad[i].workload, .model = &model };
        sim_cluster_result r;
        char err[512] = "";
        assert_int_equal(sim_cluster_run(&n, &o, &r, err, sizeof err), -1);
        if (!strstr(err, bad[i].says))
            fail_msg("%s: '%s' does not say '%s'", bad[i].workload, err, bad[i].says);
        sim_net_close(&n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_lone_transfer_takes_latency_plus_bytes_over_bandwidth),
        cmocka_unit_test(test_cluster_two_transfers_into_one_gpu_share_its_link),
        cmocka_unit_test(test_cluster_network_specs_are_checked),
        cmocka_unit_test(test_cluster_ring_allreduce_is_2n_minus_2_chunk_steps),
        cmocka_unit_test(test_cluster_ring_busbw_approaches_nvlink_for_large_messages),
        cmocka_unit_test(test_cluster_pipeline_bubble_follows_the_formula),
        cmocka_unit_test(test_cluster_step_tp_and_dp_communicate),
        cmocka_unit_test(test_cluster_workloads_are_checked),
    };
    return cmocka_run_group_tests(tests, load_model, NULL);
}
