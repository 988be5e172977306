/*
 * test_inject.c -- the injection library's callback code
 * (real/cuda/inject*.c) driven without a GPU: the stand-in driver and
 * CUPTI of fake_cupti.c take libcuda's and libcupti's place, the test
 * gives the callbacks the records CUPTI would (runtime and driver calls,
 * resources, NVTX, activity) and reads the event log the library writes,
 * then reads that log as `syncsim capture` does. Each case is one of issue
 * 32's review findings. Built only where the CUDA headers are (the
 * toolkit); without them it says so and is skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef SYNCSIM_INJECT_TEST
int main(void)
{
    puts("no CUDA headers in this build (the toolkit): the injection library is not tested");
    return 77;
}
#else

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sys/wait.h>

#include "real/cuda/inject.h"
#include "tests/cuda/fake_cupti.h"
#include "tests/traces/import_test_util.h"
#include "traces/trace.h"

int InitializeInjection(void);

static char log_path[64];
static long log_seen;           /* bytes of the log the previous case read */

/* The lines of the log written since the previous call (a static buffer). */
static const char *new_lines(void)
{
    static char *text;
    ilog_flush();
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long end = ftell(f);
    free(text);
    text = calloc(1, (size_t)(end - log_seen) + 1);
    assert_non_null(text);
    fseek(f, log_seen, SEEK_SET);
    assert_int_equal(fread(text, 1, (size_t)(end - log_seen), f), (size_t)(end - log_seen));
    fclose(f);
    log_seen = end;
    return text;
}

/* How many lines of text contain every one of the words (NULL-ended). */
static int count(const char *text, ...)
{
    int n = 0;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char *copy = strndup(line, len);
        va_list ap;
        va_start(ap, text);
        int all = 1;
        for (const char *w; (w = va_arg(ap, const char *));)
            all &= strstr(copy, w) != NULL;
        va_end(ap);
        n += all;
        free(copy);
        line += len + (nl != NULL);
    }
    return n;
}
#define COUNT(text, ...) count(text, __VA_ARGS__, (const char *)NULL)

/* One API call, entry and exit, around inside(arg) (the calls it makes). */
static void api(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const char *name,
                const void *params, uint32_t corr, void (*inside)(void *), void *arg)
{
    int ret = 0;                /* cudaSuccess, CUDA_SUCCESS */
    CUpti_CallbackData cb = { .callbackSite = CUPTI_API_ENTER, .functionName = name,
                              .functionParams = params, .functionReturnValue = &ret,
                              .context = FAKE_CONTEXT, .correlationId = corr };
    fake_callback(dom, cbid, &cb);
    if (inside)
        inside(arg);
    cb.callbackSite = CUPTI_API_EXIT;
    fake_callback(dom, cbid, &cb);
}

/* A driver allocation the library sees (cuMemAlloc_v2, outside a runtime call). */
static void mem_alloc(CUdeviceptr ptr, size_t size, uint32_t corr)
{
    CUdeviceptr p = ptr;
    cuMemAlloc_v2_params a = { &p, size };
    api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2", &a,
        corr, NULL, NULL);
}

typedef struct launch_args {
    CUfunction f;
    void **params;
    uint32_t dcorr;
} launch_args;

static void driver_launch(void *arg)
{
    launch_args *l = arg;
    cuLaunchKernel_params a = { .f = l->f, .hStream = (CUstream)0x77, .kernelParams = l->params };
    api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", &a,
        l->dcorr, NULL, NULL);
}

/* cudaLaunchKernel (corr) around cuLaunchKernel (corr + 1) of f. */
static void launch(CUfunction f, void **params, uint32_t corr)
{
    launch_args l = { f, params, corr + 1 };
    cudaLaunchKernel_v7000_params a = { .stream = (cudaStream_t)0x77 };
    api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
        "cudaLaunchKernel", &a, corr, driver_launch, &l);
}

/* A kernel's activity record. */
static void kernel_ran(uint32_t corr, uint64_t node, const char *mangled, uint64_t t0)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.correlationId = corr;
    k.streamId = 87;
    k.graphNodeId = node;
    k.start = t0;
    k.end = t0 + 1000;
    k.name = mangled;
    const void *rec[] = { &k };
    size_t size[] = { sizeof k };
    fake_activity(1, rec, size);
}

static int setup(void **state)
{
    (void)state;
    snprintf(log_path, sizeof log_path, "/tmp/syncsim-inject-XXXXXX");
    int fd = mkstemp(log_path);
    if (fd < 0)
        return -1;
    close(fd);
    setenv("SYNCSIM_CAPTURE_LOG", log_path, 1);
    return InitializeInjection() == 1 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    ilog_close();
    unlink(log_path);
    return 0;
}

/* ------------------------------------------------------------------ */

/* A structure passed by value is read whole: PyTorch's broadcasting
 * closure (648 bytes, operands at words 76-78) and a reduction's 1 KB
 * parameters (src and dst at words 120 and 121) were cut at word 64.
 * Words are kept when they point into memory the library saw allocated
 * (a count or a stride that looks like an address is not written). */
static void test_inject_whole_struct_params(void **state)
{
    (void)state;
    CUfunction f = (CUfunction)0x1001;
    size_t sizes[] = { 8, 4, 648, 1024 };
    fake_function(f, 4, sizes);
    mem_alloc(0x7f0000000000ull, 1 << 20, 100);
    mem_alloc(0x7f0000200000ull, 1 << 20, 101);
    uint64_t ptr = 0x7f0000000100ull, n = 1024;
    uint64_t closure[81] = { 0 }, reduce[128] = { 0 };
    closure[3] = 0x123456789ull;                 /* an address of nothing the program has */
    closure[76] = 0x7f0000000000ull;
    closure[77] = 0x7f0000200000ull;
    closure[78] = 0x7f0000200400ull;
    reduce[5] = 64;
    reduce[120] = 0x7f0000200000ull;
    reduce[121] = 0x7f0000000800ull;
    void *params[] = { &ptr, &n, closure, reduce };
    launch(f, params, 102);
    const char *log = new_lines();
    assert_int_equal(COUNT(log, "api ", "corr=102", "stream=", "name=cudaLaunchKernel"), 1);
    assert_int_equal(COUNT(log, "param ", "corr=102 dcorr=103 idx=0 ptr=0x7f0000000100"), 1);
    for (int w = 76; w <= 78; w++) {
        char word[32];
        snprintf(word, sizeof word, "idx=2 word=%d ", w);
        assert_int_equal(COUNT(log, "param ", "corr=102", word), 1);
    }
    assert_int_equal(COUNT(log, "param ", "corr=102", "idx=3 word=120 ptr=0x7f0000200000"), 1);
    assert_int_equal(COUNT(log, "param ", "corr=102", "idx=3 word=121 ptr=0x7f0000000800"), 1);
    assert_int_equal(COUNT(log, "0x123456789"), 0);
    assert_int_equal(COUNT(log, "param ", "corr=102"), 6);
}

/* PyTorch destroys a captured graph right after instantiating it, then
 * replays the exec: the kernel nodes and their parameters are kept at
 * instantiation (under their ids and their clones' in the exec); nothing
 * asks the destroyed graph at the launch. Read back, each node's kernel
 * accesses its buffer. */
static void test_inject_graph_destroyed_after_instantiation(void **state)
{
    (void)state;
    CUfunction f = (CUfunction)0x2001;
    size_t sizes[] = { 8 };
    fake_function(f, 1, sizes);
    mem_alloc(0x7f0000400000ull, 4096, 200);
    uint64_t a = 0x7f0000400000ull, b = 0x7f0000400800ull;
    void *pa[] = { &a }, *pb[] = { &b };
    CUfunction fs[] = { f, f };
    void **ps[] = { pa, pb };
    uint64_t ids[] = { 11, 12 };
    CUgraph g = fake_graph(2, fs, ps, ids);
    CUgraphExec exec = (CUgraphExec)0x3001;
    /* instantiation: CUPTI announces each kernel node's clone, then the call returns */
    for (int k = 0; k < 2; k++) {
        CUpti_GraphData gd = { .graph = g, .originalNode = fake_graph_node(g, k),
                               .node = (CUgraphNode)(uintptr_t)(1000 + k),
                               .nodeType = CU_GRAPH_NODE_TYPE_KERNEL };
        CUpti_ResourceData rd = { .context = FAKE_CONTEXT, .resourceDescriptor = &gd };
        fake_callback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, &rd);
    }
    CUgraphExec out = exec;
    cuGraphInstantiateWithFlags_params inst = { &out, g, 0 };
    api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags,
        "cuGraphInstantiateWithFlags", &inst, 201, NULL, NULL);
    fake_graph_destroy(g);                      /* CUDAGraph::capture_end */
    for (uint32_t corr = 210; corr <= 220; corr += 10) {    /* two replays */
        cuGraphLaunch_params dl = { exec, (CUstream)0x77 };
        cudaGraphLaunch_v10000_params rl = { (cudaGraphExec_t)exec, (cudaStream_t)0x77 };
        int ret = 0;
        CUpti_CallbackData rcb = { .callbackSite = CUPTI_API_ENTER, .functionName = "cudaGraphLaunch",
                                   .functionParams = &rl, .functionReturnValue = &ret,
                                   .context = FAKE_CONTEXT, .correlationId = corr };
        fake_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                      &rcb);
        api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch", &dl,
            corr + 1, NULL, NULL);
        rcb.callbackSite = CUPTI_API_EXIT;
        fake_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                      &rcb);
        kernel_ran(corr + 1, 1000, "_Z9node_workPf", 5000000 + corr);
        kernel_ran(corr + 1, 1001, "_Z9node_workPf", 6000000 + corr);
    }
    assert_int_equal(fake_destroyed_asks(), 0);
    const char *log = new_lines();
    for (uint32_t corr = 210; corr <= 220; corr += 10) {
        char c[32];
        snprintf(c, sizeof c, "corr=%u ", corr);
        assert_int_equal(COUNT(log, "param ", c, "node=11 ", "ptr=0x7f0000400000"), 1);
        assert_int_equal(COUNT(log, "param ", c, "node=1000 ", "ptr=0x7f0000400000"), 1);
        assert_int_equal(COUNT(log, "param ", c, "node=12 ", "ptr=0x7f0000400800"), 1);
        assert_int_equal(COUNT(log, "param ", c, "node=1001 ", "ptr=0x7f0000400800"), 1);
    }
    /* read as `syncsim capture` reads it: every replayed node accesses memory */
    trace *t = load_capture(log_path, NULL);
    int nodes = 0;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (s.label != TRACE_NONE && strcmp(trace_str(t, s.label), "node_work(float*)") == 0) {
            assert_int_equal(s.n_access, 1);
            nodes++;
        }
    }
    assert_int_equal(nodes, 4);
    trace_free(t);
}

/* The first runtime call's entry is missed (cuInit loads the library
 * inside it): its exit closes nothing, and the calls after it are logged
 * (a depth of -1 wrote t_enter[-1] and lost every later call). */
static void test_inject_exit_without_entry(void **state)
{
    (void)state;
    void *p = (void *)0x7f0000600000ull;
    cudaMalloc_v3020_params a = { &p, 4096 };
    int ret = 0;
    CUpti_CallbackData cb = { .callbackSite = CUPTI_API_EXIT, .functionName = "cudaMalloc",
                              .functionParams = &a, .functionReturnValue = &ret,
                              .context = FAKE_CONTEXT, .correlationId = 300 };
    fake_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &cb);
    api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "cudaMalloc", &a,
        301, NULL, NULL);
    const char *log = new_lines();
    assert_int_equal(COUNT(log, "corr=300 "), 0);
    assert_int_equal(COUNT(log, "api ", "corr=301 ", "ptr=0x7f0000600000 size=4096",
                           "name=cudaMalloc"), 1);
}

/* A layout the driver refuses is said (refused=CURESULT), not left empty
 * in silence; a CUkernel handed over as a CUfunction is asked as a kernel. */
static void test_inject_refused_layout(void **state)
{
    (void)state;
    CUfunction refused = (CUfunction)0x4001, kernel = (CUfunction)0x4002;
    size_t sizes[] = { 8 };
    fake_function(refused, 1, sizes);
    fake_refuse(refused, CUDA_ERROR_INVALID_HANDLE, 0);
    fake_function(kernel, 1, sizes);
    fake_refuse(kernel, CUDA_ERROR_INVALID_HANDLE, 1);
    mem_alloc(0x7f0000800000ull, 4096, 400);
    uint64_t ptr = 0x7f0000800000ull;
    void *params[] = { &ptr };
    launch(refused, params, 402);
    launch(kernel, params, 404);
    const char *log = new_lines();
    assert_int_equal(COUNT(log, "param ", "corr=402 dcorr=403 refused=400"), 1);
    assert_int_equal(COUNT(log, "param ", "corr=404 ", "idx=0 ptr=0x7f0000800000"), 1);
}

/* A driver older than 12.4 has no cuFuncGetParamInfo: the library still
 * loads (it asks cuGetProcAddress) and each launch says why it has no
 * parameters. */
static void test_inject_old_driver(void **state)
{
    (void)state;
    fake_old_driver(1);
    iparam_init();
    CUfunction f = (CUfunction)0x5001;
    size_t sizes[] = { 8 };
    fake_function(f, 1, sizes);
    uint64_t ptr = 0x7f0000800000ull;
    void *params[] = { &ptr };
    launch(f, params, 500);
    fake_old_driver(0);
    iparam_init();
    const char *log = new_lines();
    assert_int_equal(COUNT(log, "param ", "corr=500 ", "refused=500"), 1);
}

/* A module unloaded (Triton, torch.compile) empties the layout cache: a
 * function that gets the same handle is asked again. */
static void test_inject_module_unload(void **state)
{
    (void)state;
    CUfunction f = (CUfunction)0x6001;
    size_t one[] = { 8 }, two[] = { 4, 8 };
    fake_function(f, 1, one);
    uint64_t ptr = 0x7f0000800000ull, n = 3;
    void *p1[] = { &ptr }, *p2[] = { &n, &ptr };
    launch(f, p1, 600);
    CUpti_ModuleResourceData mod = { 0 };
    CUpti_ResourceData rd = { .context = FAKE_CONTEXT, .resourceDescriptor = &mod };
    fake_callback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING, &rd);
    fake_function(f, 2, two);       /* another module's kernel, same handle */
    launch(f, p2, 602);
    const char *log = new_lines();
    assert_int_equal(COUNT(log, "param ", "corr=600 ", "idx=0 ptr=0x7f0000800000"), 1);
    assert_int_equal(COUNT(log, "param ", "corr=602 ", "idx=1 ptr=0x7f0000800000"), 1);
    assert_int_equal(COUNT(log, "param ", "corr=602 ", "idx=0 "), 0);
}

/* Kernel names are written whole: PyTorch's run to kilobytes (a name cut
 * at 1023 bytes loses its parameter list). This one demangles to 4,245
 * bytes: work<outer::inner, ... (301 times)>(float const*, float*). */
static void test_inject_long_kernel_name(void **state)
{
    (void)state;
    char mangled[1024], want[4400];
    size_t at = (size_t)snprintf(mangled, sizeof mangled, "_Z4workIN5outer5innerE");
    size_t w = (size_t)snprintf(want, sizeof want, "name=void work<outer::inner");
    for (int i = 0; i < 300; i++) {
        at += (size_t)snprintf(mangled + at, sizeof mangled - at, "S1_");
        w += (size_t)snprintf(want + w, sizeof want - w, ", outer::inner");
    }
    snprintf(mangled + at, sizeof mangled - at, "EvPKfPf");
    snprintf(want + w, sizeof want - w, ">(float const*, float*)\n");
    assert_true(strlen(want) > 4000);
    kernel_ran(700, 0, mangled, 7000000);
    const char *log = new_lines();
    assert_non_null(strstr(log, want));
}

/* NVTX marks: "syncsim:rw PTR SIZE LABEL" is a host access; a mark
 * starting "syncsim:" that does not read so is counted, never written as a
 * record the reader would refuse (mode=x failed the whole import). The
 * count is written at exit: here, a forked child's. */
static void test_inject_malformed_mark(void **state)
{
    (void)state;
    static const char *const marks[] = { "syncsim:rw 7f0000800000 64 good", "syncsim:x 7000 64 bad",
                                         "syncsim:r zz 64", "syncsim:w 7000 sixty", "other text" };
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        const char *msg = marks[i];
        CUpti_NvtxData nv = { .functionName = "nvtxMarkA", .functionParams = &msg };
        fake_callback(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxMarkA, &nv);
    }
    const char *log = new_lines();
    assert_int_equal(COUNT(log, "host ", "mode=rw ptr=0x7f0000800000 size=64 name=good"), 1);
    assert_int_equal(COUNT(log, "host "), 1);
    pid_t child = fork();
    if (child == 0)
        exit(0);                /* its exit writes the note */
    int st = 0;
    assert_int_equal(waitpid(child, &st, 0), child);
    char pid[32];
    snprintf(pid, sizeof pid, "pid=%d ", (int)child);
    log = new_lines();
    assert_int_equal(COUNT(log, "note ", pid, "what=malformed-mark n=3 name=syncsim:x 7000 64 bad"),
                     1);
}

/* Four threads launch at once while the writer drains: every call is in
 * the log, once, with its thread's id. */
#define THREADS 4
#define PER_THREAD 20000

static void *launcher(void *arg)
{
    long base = (long)arg;
    CUfunction f = (CUfunction)0x1001;
    uint64_t ptr = 0x7f0000000100ull, n = 1024;
    uint64_t closure[81] = { 0 }, reduce[128] = { 0 };
    void *params[] = { &ptr, &n, closure, reduce };
    for (long i = 0; i < PER_THREAD; i++)
        launch(f, params, (uint32_t)(base + 2 * i));
    return NULL;
}

static void test_inject_threads(void **state)
{
    (void)state;
    uint64_t before = ilog_lines();
    pthread_t t[THREADS];
    for (long k = 0; k < THREADS; k++)
        assert_int_equal(pthread_create(&t[k], NULL, launcher, (void *)(1000000 * (k + 1))), 0);
    for (int k = 0; k < THREADS; k++)
        pthread_join(t[k], NULL);
    const char *log = new_lines();
    assert_int_equal(COUNT(log, "api ", "name=cudaLaunchKernel"), THREADS * PER_THREAD);
    assert_int_equal(COUNT(log, "param ", "idx=0 ptr=0x7f0000000100"), THREADS * PER_THREAD);
    assert_true(ilog_lines() - before >= 2u * THREADS * PER_THREAD);
    for (long k = 0; k < THREADS; k++) {       /* each call once */
        char corr[32];
        snprintf(corr, sizeof corr, "corr=%ld ", 1000000 * (k + 1) + 2 * (PER_THREAD - 1));
        assert_int_equal(COUNT(log, "api ", corr), 1);
    }
}

/* The clocks are paired more than once (the reader interpolates between
 * pairs): at the start, every 100 ms and at the close. */
static void test_inject_clock_pairs(void **state)
{
    (void)state;
    ilog_close();
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    char line[8192];
    char pid[32];
    snprintf(pid, sizeof pid, "clock pid=%d ", (int)getpid());
    int pairs = 0;
    while (fgets(line, sizeof line, f))
        pairs += strncmp(line, pid, strlen(pid)) == 0;
    fclose(f);
    assert_true(pairs >= 2);
    assert_int_equal(ilog_open(log_path, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inject_whole_struct_params),
        cmocka_unit_test(test_inject_graph_destroyed_after_instantiation),
        cmocka_unit_test(test_inject_exit_without_entry),
        cmocka_unit_test(test_inject_refused_layout),
        cmocka_unit_test(test_inject_old_driver),
        cmocka_unit_test(test_inject_module_unload),
        cmocka_unit_test(test_inject_long_kernel_name),
        cmocka_unit_test(test_inject_malformed_mark),
        cmocka_unit_test(test_inject_threads),
        cmocka_unit_test(test_inject_clock_pairs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

#endif
