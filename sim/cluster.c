/*
 * cluster.c -- the cluster simulator: a discrete-event simulation of ranks
 * (one GPU each) whose communication moves through a sim_net (net.h).
 *
 * Model
 * -----
 * Every GPU (rank g) has two in-order streams, compute and comm. A workload
 * is compiled, before the simulation, into one program per stream: a list
 * of operations of six kinds,
 *   kernel      runs for its price: sim_cost_kernel of cost.c with the
 *               device model (FLOPs at the f16 peak, bytes at HBM speed);
 *   record      marks an event (instantly);
 *   wait        blocks until its event is recorded, then costs the model's
 *               event_wait_device_ns (sim_cost_unblock);
 *   allreduce   a ring all-reduce of the communicator (a collective
 *               instance): it starts when every member's comm stream has
 *               reached it and runs as its algorithm's transfers through
 *               the network: 2(n-1) steps, in step s member i sends chunk
 *               B/n to member i+1; with C rings (NCCL's channels: the
 *               allreduce workload over several nodes), C such rings each
 *               of B/C, ring r rotated by r inside every node so that each
 *               leaves a node through another GPU's NIC. Member i starts step s when its own send
 *               of step s-1 and the one it received (from member i-1) have
 *               completed, allreduce_step_ns after (allreduce_base_ns more
 *               before step 0): the alpha terms of the ring formula of
 *               sim_cost_allreduce, whose beta term the network replaces.
 *               A member's allreduce ends when its last send and its last
 *               receive have completed;
 *   send        an eager send: its transfer starts when the sender's comm
 *               stream reaches it; the send ends when the bytes arrived;
 *   recv        ends when its send's bytes arrived (at once if they did).
 * The host is not simulated: it has enqueued every program before time 0
 * (a CUDA graph), so launch costs are not on the critical path.
 *
 * The loop (sim_net's run() calls it, SimGrid needing that) takes the
 * earlier of its own next event (a kernel or wait ends, a ring step's
 * overhead ends: one sim_engine used as a timed heap) and the network's
 * next completion (next(until)), so that transfers started at a time are
 * shared with those in flight by the network engine alone.
 *
 * Workloads (parse_workload): `allreduce` (one ring per group) and `step`
 * (one training step of a transformer with tensor, pipeline and data
 * parallelism; build_step says how it is laid out and what it moves).
 *
 * Trace (-o): every operation becomes a statement of a multi-rank trace
 * named as `syncsim merge` names them (docs/multi-rank.md): queues
 * r<g>.host, r<g>.compute, r<g>.comm; buffers and events r<g>.NAME; the
 * all-reduces on their communicators (tp<k>, dp<k>, ring<k>); the pipeline's
 * messages send/recv on pp. Statements are written in order of their end
 * time (ties in program order), with t= and dur=, so every record comes
 * before the wait that binds to it.
 */
#include "cluster.h"
#include "sim_int.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OP_KERNEL, OP_RECORD, OP_WAIT, OP_COLL, OP_SEND, OP_RECV };
enum { ST_COMPUTE = 0, ST_COMM = 1 };
/* Timed events of the simulator's own heap. */
enum { EV_OP_DONE = 10, EV_RING_STEP = 11 };

/* Labels of operations (the trace's labels). */
#define LABEL_MAP(X)                                                                  \
    X(NONE, "") X(FWD_ATTN, "fwd_attn") X(FWD_MLP, "fwd_mlp") X(FWD_OUT, "fwd_out")   \
    X(BWD_MLP, "bwd_mlp") X(BWD_ATTN, "bwd_attn") X(BWD_OUT, "bwd_out")               \
    X(TP_AR, "tp_allreduce") X(DP_AR, "dp_allreduce") X(AR, "allreduce")              \
    X(SEND_ACT, "send_act") X(RECV_ACT, "recv_act") X(SEND_GRAD, "send_grad")         \
    X(RECV_GRAD, "recv_grad")
enum {
#define LABEL_ENUM(name, text) L_##name,
    LABEL_MAP(LABEL_ENUM)
#undef LABEL_ENUM
};
static const char *const label_text[] = {
#define LABEL_TEXT(name, text) text,
    LABEL_MAP(LABEL_TEXT)
#undef LABEL_TEXT
};

/* Buffers of a rank: x (the tensor-parallel scratch), gw (weight
 * gradients), then per microbatch j: h.j (its input activation, kept for
 * backward), out.j (its output), dh.j (the gradient received), dout.j (the
 * gradient sent back). An access is (buffer << 2 | mode). */
enum { BUF_X = 0, BUF_GW = 1, BUF_MB = 2 };
enum { MB_H = 0, MB_OUT = 1, MB_DH = 2, MB_DOUT = 3 };
#define BUF_OF(j, k) (BUF_MB + 4 * (j) + (k))
#define ACC(buf, mode) ((uint32_t)(buf) << 2 | (mode))

typedef struct cl_op {
    uint8_t kind, stream, label, n_acc;
    int32_t rank;
    uint32_t obj;           /* event, collective or message */
    uint32_t aux;           /* collective: member index; message: tag */
    uint32_t acc[3];
    int64_t dur;            /* kernel */
    int64_t t0, t1;
} cl_op;

typedef struct cl_stream {
    uint32_t *prog;
    uint32_t n, cap, pc;
    bool busy;
} cl_stream;

typedef struct cl_event {
    int32_t waiter;         /* the wait op blocked on it, -1 */
    bool done;
} cl_event;

typedef struct cl_coll {
    int n, arrived, rings;  /* members; rings (channels) that each carry 1/rings */
    uint8_t label;
    uint64_t chunk;
    uint32_t *ops;          /* each member's op */
    /* Per ring position (ring r, place p: r x n + p): */
    int32_t *members;       /* the rank */
    uint32_t *pos_op;       /* its op */
    int32_t *started, *done;/* last ring step started / whose send completed, -1 */
    int64_t t_start;        /* when the last member arrived */
    char name[24];
} cl_coll;

typedef struct cl_msg {
    int32_t src, dst;
    uint32_t send_op, recv_op;
    uint64_t bytes;
    bool arrived, reached;  /* bytes landed; the recv's stream reached it */
} cl_msg;

typedef struct cluster {
    sim_net *net;
    const sim_model *m;
    int n;                  /* ranks */
    int64_t now;
    sim_engine heap;        /* own timed events */
    cl_op *ops;
    uint32_t n_ops, cap_ops;
    cl_stream *streams;     /* 2 per rank */
    cl_event *events;
    uint32_t n_events, cap_events;
    cl_coll *colls;
    uint32_t n_colls, cap_colls;
    cl_msg *msgs;
    uint32_t n_msgs, cap_msgs;
    trace_u64map inflight;  /* net transfer id -> what it is (xfer_tag) */
    uint64_t n_events_done, n_transfers;
    uint64_t n_ops_done, n_work;        /* for o->progress: ops and ring steps done, of */
    const sim_cluster_opts *o;
    int n_mb;               /* microbatches: buffers per rank */
    uint64_t act_bytes;     /* sizes for the trace's buffers */
    uint64_t grad_bytes;
    bool failed;
    char *err;
    size_t errlen;
} cluster;

static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
    return trace_grow32(arr, cap, need, elem);
}

/* ------------------------------------------------------------------ */
/* Pass 1: building programs.                                          */

static uint32_t add_op(cluster *c, int rank, int stream, int kind, int label)
{
    if (grow((void **)&c->ops, &c->cap_ops, c->n_ops + 1, sizeof *c->ops) != 0) {
        c->failed = true;
        return 0;
    }
    cl_stream *s = &c->streams[2 * rank + stream];
    if (grow((void **)&s->prog, &s->cap, s->n + 1, sizeof *s->prog) != 0) {
        c->failed = true;
        return 0;
    }
    uint32_t id = c->n_ops++;
    cl_op *o = &c->ops[id];
    memset(o, 0, sizeof *o);
    o->kind = (uint8_t)kind;
    o->stream = (uint8_t)stream;
    o->label = (uint8_t)label;
    o->rank = rank;
    o->t0 = o->t1 = -1;
    s->prog[s->n++] = id;
    return id;
}

static void op_access(cluster *c, uint32_t op, uint32_t acc)
{
    cl_op *o = &c->ops[op];
    if (!c->failed && o->n_acc < 3)
        o->acc[o->n_acc++] = acc;
}

static uint32_t add_kernel(cluster *c, int rank, int label, int64_t dur)
{
    uint32_t op = add_op(c, rank, ST_COMPUTE, OP_KERNEL, label);
    if (!c->failed)
        c->ops[op].dur = dur;
    return op;
}

/* The stream `from` of rank records a new event and `to` waits for it:
 * what `to` does next happens after what `from` did so far. */
static void handover(cluster *c, int rank, int from, int to)
{
    if (grow((void **)&c->events, &c->cap_events, c->n_events + 1, sizeof *c->events) != 0) {
        c->failed = true;
        return;
    }
    uint32_t ev = c->n_events++;
    c->events[ev] = (cl_event){ -1, false };
    uint32_t r = add_op(c, rank, from, OP_RECORD, L_NONE);
    uint32_t w = add_op(c, rank, to, OP_WAIT, L_NONE);
    if (!c->failed) {
        c->ops[r].obj = ev;
        c->ops[w].obj = ev;
    }
}

/* A collective instance over members (ranks in ring order), its bytes
 * split over `rings` rings (NCCL's channels): ring r visits the same
 * members, but inside each block of `block` consecutive members (a node)
 * starting r places further, so that each ring leaves a node through
 * another GPU's NIC. Returns its id. */
static uint32_t add_coll(cluster *c, const int *members, int n, uint64_t bytes, int label,
                         const char *name, int rings, int block)
{
    uint32_t cap = c->cap_colls;
    if (grow((void **)&c->colls, &cap, c->n_colls + 1, sizeof *c->colls) != 0) {
        c->failed = true;
        return 0;
    }
    c->cap_colls = cap;
    cl_coll *k = &c->colls[c->n_colls];
    memset(k, 0, sizeof *k);
    k->n = n;
    k->rings = rings;
    k->label = (uint8_t)label;
    k->chunk = (bytes + (uint64_t)n * rings - 1) / ((uint64_t)n * rings);
    snprintf(k->name, sizeof k->name, "%s", name);
    size_t np = (size_t)n * rings;
    k->ops = malloc((size_t)n * sizeof *k->ops);
    k->members = malloc(np * sizeof *k->members);
    k->pos_op = malloc(np * sizeof *k->pos_op);
    k->started = malloc(np * sizeof *k->started);
    k->done = malloc(np * sizeof *k->done);
    if (!k->members || !k->ops || !k->pos_op || !k->started || !k->done) {
        free(k->members), free(k->ops), free(k->pos_op), free(k->started), free(k->done);
        c->failed = true;
        return 0;
    }
    uint32_t id = c->n_colls++;
    for (int i = 0; i < n; i++) {
        uint32_t op = add_op(c, members[i], ST_COMM, OP_COLL, label);
        if (c->failed)
            return 0;
        c->ops[op].obj = id;
        c->ops[op].aux = (uint32_t)i;
        c->colls[id].ops[i] = op;
    }
    k = &c->colls[id];
    for (int r = 0; r < rings; r++)
        for (int p = 0; p < n; p++) {
            int base = p / block * block, i = base + (p - base + r) % block;
            size_t pos = (size_t)r * n + p;
            k->members[pos] = members[i];
            k->pos_op[pos] = k->ops[i];
            k->started[pos] = k->done[pos] = -1;
        }
    return id;
}

/* A message of bytes from src to dst; its send and recv are added where
 * their programs reach them (add_p2p). */
static uint32_t add_msg(cluster *c, int src, int dst, uint64_t bytes)
{
    uint32_t cap = c->cap_msgs;
    if (grow((void **)&c->msgs, &cap, c->n_msgs + 1, sizeof *c->msgs) != 0) {
        c->failed = true;
        return 0;
    }
    c->cap_msgs = cap;
    uint32_t id = c->n_msgs++;
    c->msgs[id] = (cl_msg){ src, dst, UINT32_MAX, UINT32_MAX, bytes, false, false };
    return id;
}

/* The send (send: true) or the recv of message id, with its tag and access. */
static void add_p2p(cluster *c, uint32_t id, bool send, int label, uint32_t tag, uint32_t acc)
{
    int rank = send ? c->msgs[id].src : c->msgs[id].dst;
    uint32_t op = add_op(c, rank, ST_COMM, send ? OP_SEND : OP_RECV, label);
    if (c->failed)
        return;
    c->ops[op].obj = id;
    c->ops[op].aux = tag;
    op_access(c, op, acc);
    if (send)
        c->msgs[id].send_op = op;
    else
        c->msgs[id].recv_op = op;
}

/* ------------------------------------------------------------------ */
/* Workloads.                                                          */

typedef struct step_cfg {
    int tp, pp, dp, mb, seq, mbs;
    bool gpipe;
    int n_layer, n_embd, n_ff, n_head, n_kv_head;
} step_cfg;

typedef struct workload {
    bool step;
    uint64_t bytes;
    char group[8];
    int channels;           /* 0: the default (build_allreduce) */
    step_cfg s;
} workload;

static int parse_u64(const char *v, uint64_t *out)
{
    char *end;
    if (!*v || *v == '-')
        return -1;
    unsigned long long x = strtoull(v, &end, 10);
    uint64_t mult = 1;
    if (*end == 'K' || *end == 'k')
        mult = 1ull << 10, end++;
    else if (*end == 'M')
        mult = 1ull << 20, end++;
    else if (*end == 'G')
        mult = 1ull << 30, end++;
    if (*end || x > UINT64_MAX / mult)
        return -1;
    *out = x * mult;
    return 0;
}

static int parse_int(const char *v, int lo, int hi, int *out)
{
    uint64_t x;
    if (parse_u64(v, &x) != 0 || x < (uint64_t)lo || x > (uint64_t)hi)
        return -1;
    *out = (int)x;
    return 0;
}

#define STEP_USAGE                                                                              \
    "step:tp=T,pp=P,dp=D,microbatches=M,seq=S[,mbs=B][,schedule=1f1b|gpipe]"                   \
    "[,model=llama:n_layer=L,n_embd=E,n_ff=F,n_head=H,n_kv_head=K]"
#define AR_USAGE "allreduce:bytes=B[,group=all|node|rail][,channels=C] (B may end in K, M, G)"

static int parse_workload(const char *spec, workload *w, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    snprintf(w->group, sizeof w->group, "all");
    w->s = (step_cfg){ .tp = 0, .pp = 0, .dp = 0, .mb = 0, .seq = 0, .mbs = 1,
                       /* a llama-70B-like model (Llama 3 70B's shape) */
                       .n_layer = 80, .n_embd = 8192, .n_ff = 28672, .n_head = 64,
                       .n_kv_head = 8 };
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    char *colon = strchr(buf, ':');
    const char *kind = buf;
    char *rest = colon ? colon + 1 : buf + strlen(buf);
    if (colon)
        *colon = '\0';
    if (strcmp(kind, "allreduce") == 0)
        w->step = false;
    else if (strcmp(kind, "step") == 0)
        w->step = true;
    else
        return snprintf(err, errlen, "workload '%s': unknown kind '%s' (expected %s, or %s)",
                        spec, kind, AR_USAGE, STEP_USAGE), -1;
    bool have_bytes = false;
    char *save = NULL;
    for (char *tok = strtok_r(rest, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return snprintf(err, errlen, "workload '%s': '%s' is not KEY=VALUE (expected %s)",
                            spec, tok, w->step ? STEP_USAGE : AR_USAGE), -1;
        *eq = '\0';
        char *key = tok, *val = eq + 1;
        int bad = 0;
        if (!w->step && strcmp(key, "bytes") == 0) {
            bad = parse_u64(val, &w->bytes) || w->bytes == 0;
            have_bytes = true;
        } else if (!w->step && strcmp(key, "channels") == 0) {
            bad = parse_int(val, 1, 64, &w->channels);
        } else if (!w->step && strcmp(key, "group") == 0) {
            bad = strcmp(val, "all") && strcmp(val, "node") && strcmp(val, "rail");
            if (!bad)
                snprintf(w->group, sizeof w->group, "%s", val);
        } else if (w->step && strcmp(key, "model") == 0) {
            /* model=llama:KEY=V: the model's first key rides in the value */
            char *mc = strchr(val, ':');
            if (strncmp(val, "llama", 5) != 0 || (val[5] && val[5] != ':'))
                return snprintf(err, errlen, "workload '%s': model '%s' is not known (expected "
                                "model=llama[:n_layer=L,...])", spec, val), -1;
            if (mc && mc[1]) {
                char *eq2 = strchr(mc + 1, '=');
                if (!eq2)
                    return snprintf(err, errlen, "workload '%s': '%s' is not KEY=VALUE", spec,
                                    mc + 1), -1;
                *eq2 = '\0';
                key = mc + 1;
                val = eq2 + 1;
                goto model_key;
            }
        } else if (w->step) {
        model_key:;
            static const struct {
                const char *key;
                size_t off;
                int lo, hi;
            } keys[] = {
                { "tp", offsetof(step_cfg, tp), 1, 1 << 20 },
                { "pp", offsetof(step_cfg, pp), 1, 1 << 20 },
                { "dp", offsetof(step_cfg, dp), 1, 1 << 20 },
                { "microbatches", offsetof(step_cfg, mb), 1, 4096 },
                { "seq", offsetof(step_cfg, seq), 1, 1 << 20 },
                { "mbs", offsetof(step_cfg, mbs), 1, 4096 },
                { "n_layer", offsetof(step_cfg, n_layer), 1, 4096 },
                { "n_embd", offsetof(step_cfg, n_embd), 1, 1 << 20 },
                { "n_ff", offsetof(step_cfg, n_ff), 1, 1 << 22 },
                { "n_head", offsetof(step_cfg, n_head), 1, 4096 },
                { "n_kv_head", offsetof(step_cfg, n_kv_head), 1, 4096 },
            };
            if (strcmp(key, "schedule") == 0) {
                bad = strcmp(val, "1f1b") && strcmp(val, "gpipe");
                w->s.gpipe = strcmp(val, "gpipe") == 0;
            } else {
                size_t k = 0;
                for (; k < sizeof keys / sizeof keys[0]; k++)
                    if (strcmp(key, keys[k].key) == 0)
                        break;
                if (k == sizeof keys / sizeof keys[0])
                    return snprintf(err, errlen, "workload '%s': unknown key '%s' (expected %s)",
                                    spec, key, STEP_USAGE), -1;
                bad = parse_int(val, keys[k].lo, keys[k].hi,
                                (int *)((char *)&w->s + keys[k].off));
            }
        } else {
            return snprintf(err, errlen, "workload '%s': unknown key '%s' (expected %s)", spec,
                            key, AR_USAGE), -1;
        }
        if (bad)
            return snprintf(err, errlen, "workload '%s': bad value '%s' for %s", spec, val, key),
                   -1;
    }
    if (!w->step && !have_bytes)
        return snprintf(err, errlen, "workload '%s': bytes= is required (expected %s)", spec,
                        AR_USAGE), -1;
    if (w->step) {
        const char *missing = !w->s.tp ? "tp" : !w->s.pp ? "pp" : !w->s.dp ? "dp"
                            : !w->s.mb ? "microbatches" : !w->s.seq ? "seq" : NULL;
        if (missing)
            return snprintf(err, errlen, "workload '%s': %s= is required (expected %s)", spec,
                            missing, STEP_USAGE), -1;
        if (w->s.n_head % w->s.n_kv_head || w->s.n_embd % w->s.n_head)
            return snprintf(err, errlen, "workload '%s': n_head must divide n_embd and n_kv_head "
                            "n_head", spec), -1;
        if (w->s.pp > w->s.n_layer)
            return snprintf(err, errlen, "workload '%s': pp=%d stages for %d layers (a stage "
                            "needs a layer)", spec, w->s.pp, w->s.n_layer), -1;
    }
    return 0;
}

static int build_allreduce(cluster *c, const workload *w, sim_cluster_result *res, char *err,
                           size_t errlen)
{
    int G = c->net->gpus_per_node, N = c->n / G;
    int n_groups, size;
    if (strcmp(w->group, "node") == 0)
        n_groups = N, size = G;
    else if (strcmp(w->group, "rail") == 0)
        n_groups = G, size = N;
    else
        n_groups = 1, size = c->n;
    if (size < 2)
        return snprintf(err, errlen, "workload allreduce group=%s: groups of %d GPU on this "
                        "network (%d x %d): an all-reduce needs 2", w->group, size, N, G), -1;
    /* NCCL's rings over several nodes: one per GPU of a node, each leaving
     * the node through its own NIC; inside a node or along a rail, one. */
    workload wc = *w;
    if (!wc.channels)
        wc.channels = strcmp(w->group, "all") == 0 && N > 1 ? G : 1;
    w = &wc;
    int *members = malloc((size_t)size * sizeof *members);
    if (!members)
        return snprintf(err, errlen, "out of memory"), -1;
    for (int k = 0; k < n_groups && !c->failed; k++) {
        for (int i = 0; i < size; i++)
            members[i] = strcmp(w->group, "node") == 0   ? k * G + i
                         : strcmp(w->group, "rail") == 0 ? i * G + k
                                                         : i;
        char name[24];
        snprintf(name, sizeof name, "ring%d", k);
        uint32_t id = add_coll(c, members, size, w->bytes, L_AR, name, w->channels,
                               strcmp(w->group, "all") == 0 ? G : 1);
        for (int i = 0; i < size && !c->failed; i++)
            op_access(c, c->colls[id].ops[i], ACC(BUF_X, TRACE_RW));
    }
    free(members);
    c->act_bytes = w->bytes;
    res->bytes = w->bytes;
    res->group_size = size;
    res->n_groups = n_groups;
    res->channels = w->channels;
    snprintf(res->group, sizeof res->group, "%.7s", w->group);
    return 0;
}

/* The prices of one microbatch on one layer of a stage, per GPU. */
typedef struct layer_cost {
    int64_t fwd_attn, fwd_mlp, bwd_attn, bwd_mlp, out;
    uint64_t act;           /* bytes of one microbatch's activation (bf16) */
    uint64_t layer_params;  /* parameters of one layer on one GPU */
} layer_cost;

/*
 * A llama layer split over tp GPUs (Megatron: column- then row-parallel),
 * for T = seq x mbs tokens, d = n_embd, d_kv = d x n_kv_head / n_head:
 *   attention  weights (2 d^2 + 2 d d_kv) / tp; FLOPs 2 T x weights + the
 *              scores and their use, causal: 2 T seq d / tp;
 *   MLP        weights 3 d n_ff / tp; FLOPs 2 T x weights;
 *   bytes      the bf16 weights read + 4 activations of T x d read or written;
 *   backward   twice the FLOPs and bytes of forward;
 * each an f16 op priced by sim_cost_kernel (family mul_mat); the residual
 * add at the end of a microbatch an `add` of 3 T d bf16 values.
 */
static layer_cost price_layer(const sim_model *m, const step_cfg *s)
{
    double T = (double)s->seq * s->mbs, d = s->n_embd, tp = s->tp;
    double dkv = d * s->n_kv_head / s->n_head;
    double w_attn = (2 * d * d + 2 * d * dkv) / tp, w_mlp = 3 * d * s->n_ff / tp;
    double act = 2 * T * d;
    double f_attn = 2 * T * w_attn + 2 * T * s->seq * d / tp, f_mlp = 2 * T * w_mlp;
    double b_attn = 2 * w_attn + 4 * act, b_mlp = 2 * w_mlp + 4 * act;
    layer_cost lc;
    lc.fwd_attn = sim_cost_kernel(m, "mul_mat", false, 0, (uint64_t)f_attn, (uint64_t)b_attn, -1);
    lc.fwd_mlp = sim_cost_kernel(m, "mul_mat", false, 0, (uint64_t)f_mlp, (uint64_t)b_mlp, -1);
    lc.bwd_attn = sim_cost_kernel(m, "mul_mat", false, 0, (uint64_t)(2 * f_attn),
                                  (uint64_t)(2 * b_attn), -1);
    lc.bwd_mlp = sim_cost_kernel(m, "mul_mat", false, 0, (uint64_t)(2 * f_mlp),
                                 (uint64_t)(2 * b_mlp), -1);
    lc.out = sim_cost_kernel(m, "add", false, 0, 0, (uint64_t)(3 * act), -1);
    lc.act = (uint64_t)act;
    lc.layer_params = (uint64_t)(w_attn + w_mlp);
    return lc;
}

/* The ranks of a step: g = ((dp_index x pp + stage) x tp + tp_index), so a
 * tensor-parallel group is tp consecutive GPUs of one node, a stage's
 * neighbour the same GPU of the next block of nodes, and a data-parallel
 * group the same local GPU of every replica (a rail). */
static int rank_of(const step_cfg *s, int dpi, int stage, int tpi)
{
    return (dpi * s->pp + stage) * s->tp + tpi;
}

typedef struct step_ctx {
    const step_cfg *s;
    layer_cost lc;
    bool bug;
    /* messages of (dpi, tpi, stage, j): fwd from stage to stage + 1, bwd
     * from stage to stage - 1 */
    uint32_t *fwd, *bwd;
} step_ctx;

static size_t msg_index(const step_cfg *s, int dpi, int tpi, int stage, int j)
{
    return (((size_t)dpi * s->tp + (size_t)tpi) * (size_t)s->pp + (size_t)stage) * (size_t)s->mb +
           (size_t)j;
}

/* One tensor-parallel all-reduce of x after a kernel of every GPU of the
 * group (the group's programs are built together, member by member). */
static void tp_allreduce(cluster *c, const step_ctx *x, int dpi, int stage)
{
    const step_cfg *s = x->s;
    if (s->tp == 1)
        return;
    int members[64];
    for (int t = 0; t < s->tp; t++) {
        members[t] = rank_of(s, dpi, stage, t);
        handover(c, members[t], ST_COMPUTE, ST_COMM);
    }
    char name[24];
    snprintf(name, sizeof name, "tp%d", dpi * s->pp + stage);
    uint32_t id = add_coll(c, members, s->tp, x->lc.act, L_TP_AR, name, 1, 1);
    for (int t = 0; t < s->tp && !c->failed; t++) {
        op_access(c, c->colls[id].ops[t], ACC(BUF_X, TRACE_RW));
        handover(c, members[t], ST_COMM, ST_COMPUTE);
    }
}

/* Layers of stage: the first n_layer % pp stages take one more. */
static int stage_layers(const step_cfg *s, int stage)
{
    return s->n_layer / s->pp + (stage < s->n_layer % s->pp);
}

/* Forward of microbatch j on (dpi, stage), for every GPU of its tp group. */
static void build_forward(cluster *c, const step_ctx *x, int dpi, int stage, int j)
{
    const step_cfg *s = x->s;
    if (stage > 0)
        for (int t = 0; t < s->tp; t++) {
            add_p2p(c, x->fwd[msg_index(s, dpi, t, stage - 1, j)], false, L_RECV_ACT,
                    (uint32_t)(2 * j), ACC(BUF_OF(j, MB_H), TRACE_W));
            handover(c, rank_of(s, dpi, stage, t), ST_COMM, ST_COMPUTE);
        }
    for (int l = 0; l < stage_layers(s, stage); l++)
        for (int half = 0; half < 2; half++) {
            for (int t = 0; t < s->tp; t++) {
                uint32_t op = add_kernel(c, rank_of(s, dpi, stage, t),
                                         half ? L_FWD_MLP : L_FWD_ATTN,
                                         half ? x->lc.fwd_mlp : x->lc.fwd_attn);
                if (l == 0 && half == 0) {
                    op_access(c, op, ACC(BUF_OF(j, MB_H), TRACE_R));
                    op_access(c, op, ACC(BUF_X, TRACE_W));
                } else {
                    op_access(c, op, ACC(BUF_X, TRACE_RW));
                }
            }
            tp_allreduce(c, x, dpi, stage);
        }
    for (int t = 0; t < s->tp; t++) {
        int g = rank_of(s, dpi, stage, t);
        uint32_t op = add_kernel(c, g, L_FWD_OUT, x->lc.out);
        op_access(c, op, ACC(BUF_X, TRACE_R));
        op_access(c, op, ACC(BUF_OF(j, MB_OUT), TRACE_W));
        if (stage + 1 < s->pp) {
            /* The seeded bug: the send of microbatch 0 by GPU 0 does not
             * wait for the kernel that writes what it sends. */
            if (!(x->bug && g == 0 && j == 0))
                handover(c, g, ST_COMPUTE, ST_COMM);
            add_p2p(c, x->fwd[msg_index(s, dpi, t, stage, j)], true, L_SEND_ACT,
                    (uint32_t)(2 * j), ACC(BUF_OF(j, MB_OUT), TRACE_R));
        }
    }
}

/* Backward of microbatch j on (dpi, stage), every GPU of its tp group. */
static void build_backward(cluster *c, const step_ctx *x, int dpi, int stage, int j)
{
    const step_cfg *s = x->s;
    if (stage + 1 < s->pp)
        for (int t = 0; t < s->tp; t++) {
            add_p2p(c, x->bwd[msg_index(s, dpi, t, stage + 1, j)], false, L_RECV_GRAD,
                    (uint32_t)(2 * j + 1), ACC(BUF_OF(j, MB_DH), TRACE_W));
            handover(c, rank_of(s, dpi, stage, t), ST_COMM, ST_COMPUTE);
        }
    for (int l = 0; l < stage_layers(s, stage); l++)
        for (int half = 0; half < 2; half++) {
            for (int t = 0; t < s->tp; t++) {
                bool first = l == 0 && half == 0;
                uint32_t op = add_kernel(c, rank_of(s, dpi, stage, t),
                                         half ? L_BWD_ATTN : L_BWD_MLP,
                                         half ? x->lc.bwd_attn : x->lc.bwd_mlp);
                op_access(c, op, ACC(first ? BUF_OF(j, MB_DH) : BUF_OF(j, MB_H), TRACE_R));
                op_access(c, op, ACC(BUF_X, first ? TRACE_W : TRACE_RW));
                op_access(c, op, ACC(BUF_GW, TRACE_RW));
            }
            tp_allreduce(c, x, dpi, stage);
        }
    for (int t = 0; t < s->tp; t++) {
        int g = rank_of(s, dpi, stage, t);
        uint32_t op = add_kernel(c, g, L_BWD_OUT, x->lc.out);
        op_access(c, op, ACC(BUF_X, TRACE_R));
        op_access(c, op, ACC(BUF_OF(j, MB_DOUT), TRACE_W));
        if (stage > 0) {
            handover(c, g, ST_COMPUTE, ST_COMM);
            add_p2p(c, x->bwd[msg_index(s, dpi, t, stage, j)], true, L_SEND_GRAD,
                    (uint32_t)(2 * j + 1), ACC(BUF_OF(j, MB_DOUT), TRACE_R));
        }
    }
}

/* The k-th task of stage: j >= 0 the forward of microbatch j, -(j + 1) its
 * backward. gpipe: every forward, then every backward; 1f1b: pp - stage - 1
 * forwards (warm-up), then a forward and a backward in turn, then the
 * remaining backwards. */
static int task_of(const step_cfg *s, int stage, int k)
{
    int warm = s->gpipe ? s->mb : (s->pp - stage - 1 < s->mb ? s->pp - stage - 1 : s->mb);
    if (k < warm)
        return k;
    if (s->gpipe)
        return -(k - s->mb + 1);
    int i = k - warm, steady = s->mb - warm;
    if (i < 2 * steady)
        return i % 2 == 0 ? warm + i / 2 : -(i / 2 + 1);
    return -(steady + (i - 2 * steady) + 1);
}

/*
 * A training step: per data-parallel replica, pp stages of tp GPUs. Each
 * stage runs its microbatches in the order of task_of; each half layer
 * (attention, MLP) is a kernel then an all-reduce of the tensor-parallel
 * group, forward and backward (Megatron's f and g); a stage receives its
 * input from the previous stage and sends its output to the next (bf16
 * activations of seq x mbs tokens; backward the gradients, the other way);
 * at the end each GPU all-reduces its weight gradients (bf16) with its rail
 * across the replicas. The embedding and the head are left out.
 */
static int build_step(cluster *c, const workload *w, bool bug, sim_cluster_result *res,
                      char *err, size_t errlen)
{
    const step_cfg *s = &w->s;
    int G = c->net->gpus_per_node;
    if ((int64_t)s->tp * s->pp * s->dp != c->n)
        return snprintf(err, errlen, "workload step: tp x pp x dp = %d x %d x %d = %lld GPUs, but "
                        "the network has %d (%d nodes x %d)", s->tp, s->pp, s->dp,
                        (long long)s->tp * s->pp * s->dp, c->n, c->n / G, G), -1;
    if (s->tp > G || G % s->tp)
        return snprintf(err, errlen, "workload step: tp=%d must divide the %d GPUs of a node "
                        "(tensor-parallel groups stay inside a node, on NVLink)", s->tp, G), -1;
    step_ctx x = { .s = s, .lc = price_layer(c->m, s), .bug = bug };
    size_t n_msg = (size_t)s->dp * s->tp * s->pp * s->mb;
    x.fwd = malloc(n_msg * sizeof *x.fwd);
    x.bwd = malloc(n_msg * sizeof *x.bwd);
    int *members = malloc((size_t)s->dp * sizeof *members);
    if (!x.fwd || !x.bwd || !members)
        c->failed = true;
    for (int dpi = 0; dpi < s->dp && !c->failed; dpi++)
        for (int t = 0; t < s->tp; t++)
            for (int stage = 0; stage < s->pp; stage++)
                for (int j = 0; j < s->mb; j++) {
                    size_t i = msg_index(s, dpi, t, stage, j);
                    int g = rank_of(s, dpi, stage, t);
                    if (stage + 1 < s->pp)
                        x.fwd[i] = add_msg(c, g, rank_of(s, dpi, stage + 1, t), x.lc.act);
                    if (stage > 0)
                        x.bwd[i] = add_msg(c, g, rank_of(s, dpi, stage - 1, t), x.lc.act);
                }
    for (int dpi = 0; dpi < s->dp && !c->failed; dpi++)
        for (int stage = 0; stage < s->pp && !c->failed; stage++)
            for (int k = 0; k < 2 * s->mb && !c->failed; k++) {
                int task = task_of(s, stage, k);
                if (task >= 0)
                    build_forward(c, &x, dpi, stage, task);
                else
                    build_backward(c, &x, dpi, stage, -task - 1);
            }
    uint64_t grads = 0;
    for (int stage = 0; stage < s->pp; stage++) {
        uint64_t b = 2 * (uint64_t)stage_layers(s, stage) * x.lc.layer_params;
        if (b > grads)
            grads = b;
    }
    if (s->dp > 1)
        for (int stage = 0; stage < s->pp && !c->failed; stage++)
            for (int t = 0; t < s->tp && !c->failed; t++) {
                for (int dpi = 0; dpi < s->dp; dpi++) {
                    members[dpi] = rank_of(s, dpi, stage, t);
                    handover(c, members[dpi], ST_COMPUTE, ST_COMM);
                }
                char name[24];
                snprintf(name, sizeof name, "dp%d", stage * s->tp + t);
                uint64_t b = 2 * (uint64_t)stage_layers(s, stage) * x.lc.layer_params;
                uint32_t id = add_coll(c, members, s->dp, b, L_DP_AR, name, 1, 1);
                for (int dpi = 0; dpi < s->dp && !c->failed; dpi++)
                    op_access(c, c->colls[id].ops[dpi], ACC(BUF_GW, TRACE_RW));
            }
    free(x.fwd);
    free(x.bwd);
    free(members);
    if (c->failed)
        return snprintf(err, errlen, "out of memory building the step's programs"), -1;
    c->n_mb = s->mb;
    c->act_bytes = x.lc.act;
    c->grad_bytes = grads;
    res->tp = s->tp;
    res->pp = s->pp;
    res->dp = s->dp;
    res->microbatches = s->mb;
    res->seq = s->seq;
    res->mbs = s->mbs;
    res->n_layer = s->n_layer;
    res->n_embd = s->n_embd;
    snprintf(res->schedule, sizeof res->schedule, "%s", s->gpipe ? "gpipe" : "1f1b");
    res->ideal_bubble = (double)(s->pp - 1) / (double)(s->mb + s->pp - 1);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Pass 2: the simulation.                                             */

/* What a network transfer is, in the inflight map: a ring step of member b
 * of collective a, or message a. */
#define XFER_RING (1ull << 63)
static uint64_t ring_tag(uint32_t coll, uint32_t member)
{
    return XFER_RING | (uint64_t)coll << 31 | member;
}

static void fail(cluster *c, const char *what)
{
    if (!c->failed)
        snprintf(c->err, c->errlen, "%s", what);
    c->failed = true;
}

static void push(cluster *c, int64_t t, uint32_t kind, uint32_t a, uint32_t b)
{
    if (sim_engine_push(&c->heap, t, kind, a, b) != 0)
        fail(c, "out of memory (event heap)");
}

static int64_t net_start(cluster *c, int src, int dst, uint64_t bytes, uint64_t tag)
{
    int64_t id = c->net->iface->start(c->net, c->now, src, dst, bytes);
    if (id < 0) {
        fail(c, "the network could not start a transfer (out of memory)");
        return -1;
    }
    uint64_t *v = trace_u64map_put(&c->inflight, (uint64_t)id, tag);
    if (!v)
        fail(c, "out of memory (transfers in flight)");
    else
        *v = tag;
    c->n_transfers++;
    return id;
}

static void advance(cluster *c, int stream);

/* The running op of a stream ended now. */
static void finish_op(cluster *c, uint32_t op)
{
    cl_op *o = &c->ops[op];
    o->t1 = c->now;
    cl_stream *s = &c->streams[2 * o->rank + o->stream];
    s->busy = false;
    s->pc++;
    c->n_ops_done++;
    advance(c, 2 * o->rank + o->stream);
}

/* Ring position pos of collective k starts its next step when it can (its
 * own send and the one it received of the step before completed), or, after
 * the last, counts its ring done for its member's op, which ends with its
 * last ring. */
static void ring_try(cluster *c, uint32_t k, uint32_t pos)
{
    cl_coll *r = &c->colls[k];
    uint32_t n = (uint32_t)r->n, base = pos / n * n;
    uint32_t prev = base + (pos - base + n - 1) % n;
    int steps = 2 * (r->n - 1);
    if (r->started[pos] == steps)
        return;                                 /* ended */
    int s = r->started[pos] + 1;                /* the step it would start */
    if (r->done[pos] < s - 1 || r->done[prev] < s - 1 || r->started[pos] > r->done[pos])
        return;
    r->started[pos] = s;
    c->n_ops_done++;                            /* a ring step counts as work done */
    if (s == steps) {
        if (--c->ops[r->pos_op[pos]].dur == 0)
            finish_op(c, r->pos_op[pos]);
        return;
    }
    int64_t overhead = c->m->allreduce_step_ns + (s == 0 ? c->m->allreduce_base_ns : 0);
    push(c, c->now + overhead, EV_RING_STEP, k, pos);
}

static uint32_t ring_next(const cl_coll *r, uint32_t pos)
{
    uint32_t n = (uint32_t)r->n, base = pos / n * n;
    return base + (pos - base + 1) % n;
}

/* The stream's next op starts if it can; instant ones end at once. */
static void advance(cluster *c, int stream)
{
    cl_stream *s = &c->streams[stream];
    while (!s->busy && s->pc < s->n && !c->failed) {
        uint32_t id = s->prog[s->pc];
        cl_op *o = &c->ops[id];
        o->t0 = c->now;
        switch (o->kind) {
        case OP_KERNEL:
            s->busy = true;
            push(c, c->now + o->dur, EV_OP_DONE, id, 0);
            return;
        case OP_RECORD: {
            cl_event *e = &c->events[o->obj];
            e->done = true;
            o->t1 = c->now;
            s->pc++;
            c->n_ops_done++;
            if (e->waiter >= 0)
                push(c, c->now + sim_cost_unblock(c->m, TRACE_WAIT, false), EV_OP_DONE,
                     (uint32_t)e->waiter, 0);
            continue;
        }
        case OP_WAIT:
            s->busy = true;
            if (c->events[o->obj].done)
                push(c, c->now + sim_cost_unblock(c->m, TRACE_WAIT, false), EV_OP_DONE, id, 0);
            else
                c->events[o->obj].waiter = (int32_t)id;
            return;
        case OP_COLL: {
            s->busy = true;
            cl_coll *r = &c->colls[o->obj];
            o->dur = r->rings;                  /* rings still to end */
            if (++r->arrived == r->n) {
                r->t_start = c->now;
                for (uint32_t pos = 0; pos < (uint32_t)(r->n * r->rings); pos++)
                    ring_try(c, o->obj, pos);
            }
            return;
        }
        case OP_SEND: {
            s->busy = true;
            cl_msg *mg = &c->msgs[o->obj];
            net_start(c, mg->src, mg->dst, mg->bytes, o->obj);
            return;
        }
        case OP_RECV: {
            cl_msg *mg = &c->msgs[o->obj];
            if (mg->arrived) {
                o->t1 = c->now;
                s->pc++;
                c->n_ops_done++;
                continue;
            }
            s->busy = true;
            mg->reached = true;
            return;
        }
        }
    }
}

static void on_transfer(cluster *c, int64_t id)
{
    uint64_t *v = trace_u64map_get(&c->inflight, (uint64_t)id);
    if (!v) {
        fail(c, "the network completed a transfer it was not given");
        return;
    }
    uint64_t tag = *v;
    trace_u64map_del(&c->inflight, (uint64_t)id);
    if (tag & XFER_RING) {
        uint32_t k = (uint32_t)((tag & ~XFER_RING) >> 31);
        uint32_t pos = (uint32_t)(tag & 0x7fffffff);
        cl_coll *r = &c->colls[k];
        r->done[pos] = r->started[pos];
        ring_try(c, k, pos);
        ring_try(c, k, ring_next(r, pos));
        return;
    }
    cl_msg *mg = &c->msgs[tag];
    mg->arrived = true;
    finish_op(c, mg->send_op);
    if (mg->reached)
        finish_op(c, mg->recv_op);
}

static void on_event(cluster *c, const sim_heap_ev *ev)
{
    if (ev->kind == EV_OP_DONE) {
        finish_op(c, ev->a);
    } else if (ev->kind == EV_RING_STEP) {
        cl_coll *r = &c->colls[ev->a];
        net_start(c, r->members[ev->b], r->members[ring_next(r, ev->b)], r->chunk,
                  ring_tag(ev->a, ev->b));
    }
}

static int sim_loop(void *arg)
{
    cluster *c = arg;
    for (int st = 0; st < 2 * c->n; st++)
        advance(c, st);
    while (!c->failed) {
        int64_t until = c->heap.n_heap ? c->heap.heap[0].t : INT64_MAX;
        int64_t at, id;
        if (c->net->iface->next(c->net, until, &at, &id)) {
            if (at > c->now)
                c->now = at;
            c->n_events_done++;
            on_transfer(c, id);
            continue;
        }
        sim_heap_ev ev;
        if (!sim_engine_pop(&c->heap, &ev))
            break;
        if (ev.t > c->now)
            c->now = ev.t;
        c->n_events_done++;
        on_event(c, &ev);
        if (c->o->progress && (c->n_events_done & 4095) == 0)
            c->o->progress(c->o->progress_ctx, c->n_ops_done, c->n_work);
    }
    return c->failed ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Pass 3: the trace.                                                  */

/* An op's place in the trace: by end time, ties in program order. */
typedef struct end_key {
    int64_t t1;
    uint32_t op;
} end_key;

static int by_end(const void *a, const void *b)
{
    const end_key *x = a, *y = b;
    if (x->t1 != y->t1)
        return x->t1 < y->t1 ? -1 : 1;
    return x->op < y->op ? -1 : x->op > y->op;
}

static void buffer_name(char *out, size_t cap, int rank, uint32_t buf)
{
    static const char *const mb_names[] = { "h", "out", "dh", "dout" };
    if (buf == BUF_X)
        snprintf(out, cap, "r%d.x", rank);
    else if (buf == BUF_GW)
        snprintf(out, cap, "r%d.gw", rank);
    else
        snprintf(out, cap, "r%d.%s.%u", rank, mb_names[(buf - BUF_MB) % 4], (buf - BUF_MB) / 4);
}

static int write_trace(cluster *c, const sim_cluster_opts *o, sim_cluster_result *res)
{
    trace_error terr = { 0 };
    trace_recorder_opts ro = { .run_name = "cluster", .source = "cluster" };
    trace_recorder *rec = trace_recorder_open(o->trace_path, &ro, &terr);
    if (!rec) {
        snprintf(c->err, c->errlen, "%s", terr.msg);
        return -1;
    }
    int rc = -1;
    uint32_t n_buf = BUF_MB + 4 * (uint32_t)c->n_mb;
    uint32_t *queues = malloc(3 * (size_t)c->n * sizeof *queues);
    uint32_t *bufs = malloc((size_t)c->n * n_buf * sizeof *bufs);
    end_key *order = malloc((size_t)c->n_ops * sizeof *order);
    /* Event names are slots of their rank, r<g>.e<k>: a record takes a slot
     * its rank has free, its wait gives it back. A rank then names as many
     * events as it has handovers in flight, as a CUDA program reuses its
     * events, and the checker keeps that many recorded clocks instead of
     * one per handover. Binding is unchanged: in the written order a
     * record comes before its wait, and its slot is not recorded again in
     * between. */
    size_t n_ev = c->n_events ? c->n_events : 1;
    uint32_t *ev_slot = malloc(n_ev * sizeof *ev_slot), *free_next = malloc(n_ev * sizeof *free_next);
    uint32_t *free_head = malloc((size_t)c->n * sizeof *free_head);
    uint32_t *n_slots = calloc((size_t)c->n, sizeof *n_slots);
    uint32_t labels[sizeof label_text / sizeof label_text[0]];
    if (!queues || !bufs || !order || !ev_slot || !free_next || !free_head || !n_slots) {
        snprintf(c->err, c->errlen, "out of memory writing the trace");
        goto done;
    }
    char name[64], dev[32], num[32];
    snprintf(num, sizeof num, "%d", c->n);
    trace_recorder_meta(rec, "world_size", num);
    trace_recorder_meta(rec, "network", c->net->describe);
    trace_recorder_meta(rec, "workload", o->workload);
    trace_recorder_meta(rec, "device_model", c->m->name);
    if (o->seed_bug)
        trace_recorder_meta(rec, "seeded_bug", o->seed_bug);
    for (size_t l = 0; l < sizeof label_text / sizeof label_text[0]; l++)
        labels[l] = trace_recorder_intern(rec, label_text[l]);
    for (int g = 0; g < c->n; g++) {
        snprintf(dev, sizeof dev, "r%d.0", g);
        snprintf(name, sizeof name, "r%d.host", g);
        queues[3 * g] = trace_recorder_queue(rec, name, TRACE_QUEUE_HOST, NULL);
        snprintf(name, sizeof name, "r%d.compute", g);
        queues[3 * g + 1] = trace_recorder_queue(rec, name, TRACE_QUEUE_STREAM, dev);
        snprintf(name, sizeof name, "r%d.comm", g);
        queues[3 * g + 2] = trace_recorder_queue(rec, name, TRACE_QUEUE_STREAM, dev);
        for (uint32_t b = 0; b < n_buf; b++) {
            buffer_name(name, sizeof name, g, b);
            uint64_t size = b == BUF_GW ? c->grad_bytes : c->act_bytes;
            bufs[(size_t)g * n_buf + b] =
                trace_recorder_buffer(rec, name, size ? size : 1, TRACE_LOC_DEVICE, dev, false);
        }
    }
    uint32_t allreduce = trace_recorder_intern(rec, "allreduce");
    uint32_t pp = trace_recorder_intern(rec, "pp");
    uint32_t *comm_names = malloc((size_t)(c->n_colls ? c->n_colls : 1) * sizeof *comm_names);
    if (!comm_names) {
        snprintf(c->err, c->errlen, "out of memory writing the trace");
        goto done;
    }
    for (uint32_t k = 0; k < c->n_colls; k++)
        comm_names[k] = trace_recorder_intern(rec, c->colls[k].name);
    for (int g = 0; g < c->n; g++)
        free_head[g] = UINT32_MAX;
    for (uint32_t i = 0; i < c->n_ops; i++)
        order[i] = (end_key){ c->ops[i].t1, i };
    qsort(order, c->n_ops, sizeof *order, by_end);
    for (uint32_t n = 0; n < c->n_ops; n++) {
        const cl_op *op = &c->ops[order[n].op];
        trace_stmt st;
        trace_stmt_init(&st);
        trace_access acc[3];
        st.queue = queues[3 * op->rank + 1 + op->stream];
        st.by = queues[3 * op->rank];
        st.t = op->t0;
        st.dur = op->t1 - op->t0;
        if (op->label != L_NONE)
            st.label = labels[op->label];
        for (uint32_t a = 0; a < op->n_acc; a++) {
            uint32_t b = op->acc[a] >> 2;
            acc[a] = (trace_access){ .buffer = bufs[(size_t)op->rank * n_buf + b],
                                     .mode = (uint8_t)(op->acc[a] & 3), .form = TRACE_REF_WHOLE,
                                     .lo = 0,
                                     .hi = b == BUF_GW ? c->grad_bytes : c->act_bytes };
            if (!acc[a].hi)
                acc[a].hi = 1;
        }
        st.n_access = op->n_acc;
        st.access = acc;
        switch (op->kind) {
        case OP_KERNEL:
            st.kind = TRACE_OP;
            break;
        case OP_RECORD:
        case OP_WAIT: {
            uint32_t ev = op->obj, *head = &free_head[op->rank];
            if (op->kind == OP_RECORD) {
                if (*head != UINT32_MAX) {
                    ev_slot[ev] = ev_slot[*head];
                    *head = free_next[*head];
                } else {
                    ev_slot[ev] = n_slots[op->rank]++;
                }
            } else {
                free_next[ev] = *head;
                *head = ev;
            }
            st.kind = op->kind == OP_RECORD ? TRACE_RECORD : TRACE_WAIT;
            snprintf(name, sizeof name, "r%d.e%u", op->rank, ev_slot[ev]);
            st.object = trace_recorder_intern(rec, name);
            break;
        }
        case OP_COLL:
            st.kind = TRACE_COLLECTIVE;
            st.object = comm_names[op->obj];
            st.coll_kind = allreduce;
            st.count = (uint64_t)c->colls[op->obj].n;
            break;
        case OP_SEND:
        case OP_RECV: {
            const cl_msg *mg = &c->msgs[op->obj];
            st.kind = op->kind == OP_SEND ? TRACE_SEND : TRACE_RECV;
            st.object = pp;
            st.rank = (uint32_t)(op->kind == OP_SEND ? mg->src : mg->dst);
            st.peer = (uint32_t)(op->kind == OP_SEND ? mg->dst : mg->src);
            st.count = op->aux;
            break;
        }
        }
        trace_recorder_append(rec, &st);
    }
    free(comm_names);
    res->stmts_written = c->n_ops;
    res->run = trace_recorder_run(rec);
    rc = 0;
done:
    free(queues);
    free(bufs);
    free(order);
    free(ev_slot);
    free(free_next);
    free(free_head);
    free(n_slots);
    if (trace_recorder_close(rec, &terr) != 0 && rc == 0) {
        snprintf(c->err, c->errlen, "%s", terr.msg);
        rc = -1;
    }
    return rc;
}

/* ------------------------------------------------------------------ */

static void cluster_free(cluster *c)
{
    for (int st = 0; st < 2 * c->n; st++)
        free(c->streams[st].prog);
    free(c->streams);
    free(c->ops);
    free(c->events);
    for (uint32_t k = 0; k < c->n_colls; k++) {
        free(c->colls[k].members);
        free(c->colls[k].ops);
        free(c->colls[k].pos_op);
        free(c->colls[k].started);
        free(c->colls[k].done);
    }
    free(c->colls);
    free(c->msgs);
    trace_u64map_free(&c->inflight);
    sim_engine_release(&c->heap);
}

int sim_cluster_run(sim_net *net, const sim_cluster_opts *o, sim_cluster_result *res, char *err,
                    size_t errlen)
{
    memset(res, 0, sizeof *res);
    res->run = -1;
    workload w;
    if (parse_workload(o->workload, &w, err, errlen) != 0)
        return -1;
    if (o->seed_bug && strcmp(o->seed_bug, "send-before-compute") != 0)
        return snprintf(err, errlen, "seeded bug '%s' is not known (expected %s)", o->seed_bug,
                        SIM_CLUSTER_BUGS), -1;
    if (o->seed_bug && (!w.step || w.s.pp < 2))
        return snprintf(err, errlen, "seeded bug %s needs a step workload with pp >= 2 (a stage "
                        "that sends)", o->seed_bug), -1;
    cluster c = { .net = net, .m = o->model, .n = net->n_gpus, .err = err, .errlen = errlen,
                  .o = o };
    sim_engine_init(&c.heap);
    c.streams = calloc(2 * (size_t)c.n, sizeof *c.streams);
    int rc = -1;
    if (!c.streams) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    snprintf(res->workload, sizeof res->workload, "%s", w.step ? "step" : "allreduce");
    if ((w.step ? build_step(&c, &w, o->seed_bug != NULL, res, err, errlen)
                : build_allreduce(&c, &w, res, err, errlen)) != 0)
        goto done;
    if (c.failed) {
        snprintf(err, errlen, "out of memory building the programs");
        goto done;
    }
    /* the work: every op, and every step of every ring position (a big
     * all-reduce is one op per GPU, and its steps are nearly all the time) */
    c.n_work = c.n_ops;
    for (uint32_t k = 0; k < c.n_colls; k++)
        c.n_work += (uint64_t)c.colls[k].n * (uint64_t)c.colls[k].rings * (uint64_t)(2 * c.colls[k].n - 1);
    if ((net->iface->run ? net->iface->run(net, sim_loop, &c) : sim_loop(&c)) != 0)
        goto done;
    if (o->progress)
        o->progress(o->progress_ctx, c.n_ops_done, c.n_work);
    /* Every stream ran to its end, or the programs hang (a bug of this file). */
    for (int st = 0; st < 2 * c.n; st++)
        if (c.streams[st].pc < c.streams[st].n) {
            snprintf(err, errlen, "internal error: GPU %d's %s stream stopped at op %u of %u", st / 2,
                     st % 2 ? "comm" : "compute", c.streams[st].pc, c.streams[st].n);
            goto done;
        }
    res->ops = c.n_ops;
    res->events = c.n_events_done;
    res->transfers = c.n_transfers;
    int64_t end = 0, last_kernel = 0;
    double compute = 0, comm = 0;
    for (uint32_t i = 0; i < c.n_ops; i++) {
        const cl_op *op = &c.ops[i];
        if (op->t1 > end)
            end = op->t1;
        if (op->kind == OP_KERNEL) {
            compute += (double)(op->t1 - op->t0);
            if (op->t1 > last_kernel)
                last_kernel = op->t1;
        } else if (op->kind == OP_COLL) {
            comm += (double)(op->t1 - c.colls[op->obj].t_start);
        } else if (op->kind == OP_SEND) {
            comm += (double)(op->t1 - op->t0);
        }
    }
    res->time_ns = end;
    res->compute_ns = compute / c.n;
    res->comm_ns = comm / c.n;
    res->pipeline_ns = last_kernel;
    res->bubble = last_kernel > 0 ? 1.0 - res->compute_ns / (double)last_kernel : 0;
    if (!w.step && end > 0) {
        res->algbw_gbps = (double)res->bytes / (double)end;
        res->busbw_gbps = res->algbw_gbps * 2.0 * (res->group_size - 1) / res->group_size;
    }
    if (net->iface->busiest)
        res->busiest_bytes = net->iface->busiest(net, res->busiest, sizeof res->busiest);
    if (o->trace_path && write_trace(&c, o, res) != 0)
        goto done;
    rc = 0;
done:
    cluster_free(&c);
    return rc;
}
