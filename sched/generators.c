/*
 * generators.c -- built-in model graphs: mlp, llama (layer split) and tp
 * (a llama stack sharded across devices, joined by all-reduces).
 *
 * The llama graph is the decoder of llama.cpp's build_llama, one
 * evaluation of n_tokens tokens against a KV cache of n_ctx cells:
 *
 *   inp_tokens -> get_rows(tok_embd)                 (input layer on the CPU)
 *   per layer:  rms_norm, mul(attn_norm), q/k/v mul_mats, rope(q, k),
 *               cpy k and v into the cache, kq = mul_mat(k_cache, q),
 *               scale, softmax(kq, kq_mask), kqv = mul_mat(v_cache, kq),
 *               mul_mat(wo), add (residual), rms_norm, mul(ffn_norm),
 *               gate/up mul_mats, silu, mul, mul_mat(w_down), add
 *   output:     rms_norm, mul(output_norm), mul_mat(output) -> logits
 *
 * Layer split gives layer l to device l * n_devices / n_layer and the
 * output head to the last device. Tensor split (tp) gives every device a
 * shard of each layer (its heads of wq/wk/wv and its rows of wo; its
 * columns of gate/up and rows of down): each device computes a partial
 * sum of the attention and feed-forward outputs and an all_reduce joins
 * them; the output head goes to device 0. A rank of a tensor split over
 * processes (one_rank, MPI) builds only its own shard, on its device 0,
 * and the output head from its own copy of the last all-reduce.
 */
#include "sched.h"

#include <stdlib.h>
#include <string.h>

void sched_model_defaults(sched_model_params *p, const char *kind)
{
    memset(p, 0, sizeof *p);
    snprintf(p->kind, sizeof p->kind, "%s", kind ? kind : "llama");
    p->n_layer = 8;
    p->n_embd = 1024;
    p->n_head = 16;
    p->n_head_kv = 4;
    p->n_ff = 2816;
    p->n_vocab = 32000;
    p->n_ctx = 512;
    p->batch = 64;
    p->ubatch = 32;
    p->dtype = SCHED_F16;
    p->n_devices = 2;
    p->n_expert = 8;
    p->n_expert_used = 2;
    p->split_mode = strcmp(p->kind, "tp") == 0 ? SCHED_SPLIT_TENSOR : SCHED_SPLIT_LAYER;
    if (strcmp(p->kind, "mlp") == 0) {
        p->n_layer = 4;
        p->n_ff = 4096;
    }
}

int sched_model_parse(const char *spec, sched_model_params *p, char *err, size_t err_cap)
{
    const char *colon = strchr(spec, ':');
    size_t kind_len = colon ? (size_t)(colon - spec) : strlen(spec);
    char kind[16];
    if (kind_len == 0 || kind_len >= sizeof kind) {
        snprintf(err, err_cap, "model '%s': expected KIND[:key=value,...] with KIND mlp, llama, tp or moe",
                 spec);
        return -1;
    }
    memcpy(kind, spec, kind_len);
    kind[kind_len] = '\0';
    if (strcmp(kind, "mlp") && strcmp(kind, "llama") && strcmp(kind, "tp") && strcmp(kind, "moe")) {
        snprintf(err, err_cap, "model '%s': unknown kind '%s' (expected mlp, llama, tp or moe)", spec,
                 kind);
        return -1;
    }
    sched_model_defaults(p, kind);
    if (!colon)
        return 0;
    char *copy = strdup(colon + 1);
    if (!copy) {
        snprintf(err, err_cap, "out of memory");
        return -1;
    }
    int rc = 0;
    char *save = NULL;
    for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            snprintf(err, err_cap, "model '%s': expected key=value, got '%s'", spec, kv);
            rc = -1;
            break;
        }
        *eq = '\0';
        const char *key = kv, *val = eq + 1;
        if (strcmp(key, "dtype") == 0) {
            int d = sched_dtype_parse(val);
            if (d < 0 || d == SCHED_I32) {
                snprintf(err, err_cap, "model '%s': dtype must be f32, f16 or bf16, got '%s'",
                         spec, val);
                rc = -1;
                break;
            }
            p->dtype = (sched_dtype)d;
            continue;
        }
        if (strcmp(key, "split") == 0) {
            if (strcmp(val, "layer") == 0)
                p->split_mode = SCHED_SPLIT_LAYER;
            else if (strcmp(val, "tensor") == 0)
                p->split_mode = SCHED_SPLIT_TENSOR;
            else {
                snprintf(err, err_cap, "model '%s': split must be layer or tensor", spec);
                rc = -1;
                break;
            }
            continue;
        }
        static const struct { const char *key; size_t off; } keys[] = {
            { "n_layer", offsetof(sched_model_params, n_layer) },
            { "n_embd", offsetof(sched_model_params, n_embd) },
            { "n_head", offsetof(sched_model_params, n_head) },
            { "n_head_kv", offsetof(sched_model_params, n_head_kv) },
            { "n_ff", offsetof(sched_model_params, n_ff) },
            { "n_vocab", offsetof(sched_model_params, n_vocab) },
            { "n_ctx", offsetof(sched_model_params, n_ctx) },
            { "batch", offsetof(sched_model_params, batch) },
            { "ubatch", offsetof(sched_model_params, ubatch) },
            { "devices", offsetof(sched_model_params, n_devices) },
            { "n_expert", offsetof(sched_model_params, n_expert) },
            { "n_expert_used", offsetof(sched_model_params, n_expert_used) },
        };
        size_t k;
        for (k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (strcmp(keys[k].key, key) == 0)
                break;
        char *end;
        long v = strtol(val, &end, 10);
        if (k == sizeof keys / sizeof keys[0]) {
            snprintf(err, err_cap,
                     "model '%s': unknown key '%s' (expected n_layer, n_embd, n_head, n_head_kv, "
                     "n_ff, n_vocab, n_ctx, batch, ubatch, dtype, devices, split, n_expert, "
                     "n_expert_used)", spec, key);
            rc = -1;
            break;
        }
        if (*val == '\0' || *end || v < 1 || v > (1L << 24)) {
            snprintf(err, err_cap, "model '%s': %s takes a whole number from 1 to %ld, got '%s'",
                     spec, key, 1L << 24, val);
            rc = -1;
            break;
        }
        *(int *)((char *)p + keys[k].off) = (int)v;
    }
    free(copy);
    if (rc == 0 && strcmp(p->kind, "mlp") != 0) {
        if (p->n_embd % p->n_head || p->n_head % p->n_head_kv) {
            snprintf(err, err_cap, "model '%s': n_embd must be a multiple of n_head and n_head of "
                     "n_head_kv", spec);
            rc = -1;
        } else if (p->split_mode == SCHED_SPLIT_TENSOR &&
                   (p->n_head_kv % p->n_devices || p->n_ff % p->n_devices)) {
            snprintf(err, err_cap, "model '%s': tensor split needs n_head_kv and n_ff divisible "
                     "by the %d devices", spec, p->n_devices);
            rc = -1;
        }
    }
    if (rc == 0 && strcmp(p->kind, "tp") == 0)
        p->split_mode = SCHED_SPLIT_TENSOR;
    if (rc == 0 && strcmp(p->kind, "moe") == 0) {
        if (p->n_expert_used > p->n_expert) {
            snprintf(err, err_cap, "model '%s': n_expert_used (%d) must be at most n_expert (%d)",
                     spec, p->n_expert_used, p->n_expert);
            rc = -1;
        } else if (p->split_mode == SCHED_SPLIT_TENSOR) {
            snprintf(err, err_cap, "model '%s': moe is layer split only", spec);
            rc = -1;
        }
    }
    return rc;
}

/* ------------------------------------------------------------------ */

typedef struct builder {
    sched_graph *g;
    bool failed;
} builder;

static int32_t leaf(builder *b, const char *name, sched_dtype type, int n_dims, int64_t n0,
                    int64_t n1, int64_t n2, uint32_t flags, int home)
{
    int64_t ne[4] = { n0, n1, n2, 1 };
    int32_t t = sched_graph_leaf(b->g, name, type, n_dims, ne, flags);
    if (t < 0) {
        b->failed = true;
        return 0;
    }
    b->g->tensors[t].home = home;
    return t;
}

static int32_t op(builder *b, const char *name, sched_op o, int32_t a, int32_t c)
{
    int32_t srcs[2] = { a, c };
    int n = c >= 0 ? 2 : 1;
    int32_t t = b->failed ? -1 : sched_graph_op(b->g, name, o, srcs, n);
    if (t < 0) {
        b->failed = true;
        return 0;
    }
    return t;
}

static int32_t view(builder *b, const char *name, sched_op o, int32_t src, int n_dims, int64_t n0,
                    int64_t n1, int64_t n2, uint64_t offs)
{
    int64_t ne[4] = { n0, n1, n2, 1 };
    int32_t t = b->failed ? -1
                          : sched_graph_view(b->g, name, o, src, b->g->tensors[src].type, n_dims,
                                             ne, offs);
    if (t < 0) {
        b->failed = true;
        return 0;
    }
    return t;
}

#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)

static sched_graph *build_mlp(const sched_model_params *p, int T)
{
    builder b = { sched_graph_new("mlp"), false };
    if (!b.g)
        return NULL;
    char nm[SCHED_NAME_MAX];
    int64_t E = p->n_embd, F = p->n_ff;
    int32_t x = leaf(&b, "inp_x", SCHED_F32, 2, E, T, 1, SCHED_FLAG_INPUT, -1);
    for (int l = 0; l < p->n_layer; l++) {
        int dev = l * p->n_devices / p->n_layer;
        int32_t w1 = leaf(&b, NAME("blk.%d.w1", l), p->dtype, 2, E, F, 1, SCHED_FLAG_WEIGHT, dev);
        int32_t w2 = leaf(&b, NAME("blk.%d.w2", l), p->dtype, 2, F, E, 1, SCHED_FLAG_WEIGHT, dev);
        int32_t h = op(&b, NAME("l%d.up", l), SCHED_OP_MUL_MAT, w1, x);
        h = op(&b, NAME("l%d.silu", l), SCHED_OP_SILU, h, -1);
        h = op(&b, NAME("l%d.down", l), SCHED_OP_MUL_MAT, w2, h);
        x = op(&b, NAME("l%d.out", l), SCHED_OP_ADD, h, x);
    }
    if (!b.failed)
        b.g->tensors[x].flags |= SCHED_FLAG_OUTPUT;
    if (b.failed) {
        sched_graph_free(b.g);
        return NULL;
    }
    return b.g;
}

/* One device's share of a decoder layer: n_head heads of which n_head_kv
 * are KV heads. Returns the attention output (a partial sum under tensor
 * split) through *attn and leaves the feed-forward to ffn_part. */
static int32_t attention(builder *b, const sched_model_params *p, int l, int dev, const char *sfx,
                         int32_t x, int32_t inp_pos, int32_t kq_mask, int n_head, int n_head_kv,
                         int T)
{
    char nm[SCHED_NAME_MAX];
    int64_t E = p->n_embd, hd = p->n_embd / p->n_head;
    int64_t Eq = hd * n_head, Ekv = hd * n_head_kv, C = p->n_ctx;
    int32_t norm_w = leaf(b, NAME("blk.%d.attn_norm%s", l, sfx), SCHED_F32, 1, E, 1, 1,
                          SCHED_FLAG_WEIGHT, dev);
    int32_t wq = leaf(b, NAME("blk.%d.wq%s", l, sfx), p->dtype, 2, E, Eq, 1, SCHED_FLAG_WEIGHT, dev);
    int32_t wk = leaf(b, NAME("blk.%d.wk%s", l, sfx), p->dtype, 2, E, Ekv, 1, SCHED_FLAG_WEIGHT, dev);
    int32_t wv = leaf(b, NAME("blk.%d.wv%s", l, sfx), p->dtype, 2, E, Ekv, 1, SCHED_FLAG_WEIGHT, dev);
    int32_t wo = leaf(b, NAME("blk.%d.wo%s", l, sfx), p->dtype, 2, Eq, E, 1, SCHED_FLAG_WEIGHT, dev);
    int32_t kc = leaf(b, NAME("cache_k.%d%s", l, sfx), SCHED_F16, 1, Ekv * C, 1, 1,
                      SCHED_FLAG_CACHE, dev);
    int32_t vc = leaf(b, NAME("cache_v.%d%s", l, sfx), SCHED_F16, 1, Ekv * C, 1, 1,
                      SCHED_FLAG_CACHE, dev);
    int32_t cur = op(b, NAME("l%d.attn_norm%s", l, sfx), SCHED_OP_RMS_NORM, x, -1);
    cur = op(b, NAME("l%d.attn_norm_w%s", l, sfx), SCHED_OP_MUL, cur, norm_w);
    int32_t q = op(b, NAME("l%d.q%s", l, sfx), SCHED_OP_MUL_MAT, wq, cur);
    int32_t k = op(b, NAME("l%d.k%s", l, sfx), SCHED_OP_MUL_MAT, wk, cur);
    int32_t v = op(b, NAME("l%d.v%s", l, sfx), SCHED_OP_MUL_MAT, wv, cur);
    q = view(b, NAME("l%d.q3%s", l, sfx), SCHED_OP_RESHAPE, q, 3, hd, n_head, T, 0);
    k = view(b, NAME("l%d.k3%s", l, sfx), SCHED_OP_RESHAPE, k, 3, hd, n_head_kv, T, 0);
    q = op(b, NAME("l%d.q_rope%s", l, sfx), SCHED_OP_ROPE, q, inp_pos);
    k = op(b, NAME("l%d.k_rope%s", l, sfx), SCHED_OP_ROPE, k, inp_pos);
    /* Store this evaluation's keys and values in the cache (cells [0, T)). */
    int32_t kdst = view(b, NAME("l%d.k_cache_w%s", l, sfx), SCHED_OP_VIEW, kc, 1, Ekv * T, 1, 1, 0);
    op(b, NAME("l%d.k_store%s", l, sfx), SCHED_OP_CPY, k, kdst);
    int32_t vdst = view(b, NAME("l%d.v_cache_w%s", l, sfx), SCHED_OP_VIEW, vc, 1, Ekv * T, 1, 1, 0);
    op(b, NAME("l%d.v_store%s", l, sfx), SCHED_OP_CPY, v, vdst);
    int32_t kall = view(b, NAME("l%d.k_cache%s", l, sfx), SCHED_OP_VIEW, kc, 3, hd, C, n_head_kv, 0);
    int32_t vall = view(b, NAME("l%d.v_cache%s", l, sfx), SCHED_OP_VIEW, vc, 3, C, hd, n_head_kv, 0);
    int32_t qp = view(b, NAME("l%d.q_perm%s", l, sfx), SCHED_OP_PERMUTE, q, 3, hd, T, n_head, 0);
    int32_t kq = op(b, NAME("l%d.kq%s", l, sfx), SCHED_OP_MUL_MAT, kall, qp);
    kq = op(b, NAME("l%d.kq_scale%s", l, sfx), SCHED_OP_SCALE, kq, -1);
    kq = op(b, NAME("l%d.kq_softmax%s", l, sfx), SCHED_OP_SOFTMAX, kq, kq_mask);
    int32_t kqv = op(b, NAME("l%d.kqv%s", l, sfx), SCHED_OP_MUL_MAT, vall, kq);
    kqv = view(b, NAME("l%d.kqv_merged%s", l, sfx), SCHED_OP_PERMUTE, kqv, 2, Eq, T, 1, 0);
    return op(b, NAME("l%d.attn_out%s", l, sfx), SCHED_OP_MUL_MAT, wo, kqv);
}

static int32_t feed_forward(builder *b, const sched_model_params *p, int l, int dev,
                            const char *sfx, int32_t x, int64_t F)
{
    char nm[SCHED_NAME_MAX];
    int64_t E = p->n_embd;
    int32_t norm_w = leaf(b, NAME("blk.%d.ffn_norm%s", l, sfx), SCHED_F32, 1, E, 1, 1,
                          SCHED_FLAG_WEIGHT, dev);
    int32_t wg = leaf(b, NAME("blk.%d.ffn_gate%s", l, sfx), p->dtype, 2, E, F, 1, SCHED_FLAG_WEIGHT, dev);
    int32_t wu = leaf(b, NAME("blk.%d.ffn_up%s", l, sfx), p->dtype, 2, E, F, 1, SCHED_FLAG_WEIGHT, dev);
    int32_t wd = leaf(b, NAME("blk.%d.ffn_down%s", l, sfx), p->dtype, 2, F, E, 1, SCHED_FLAG_WEIGHT, dev);
    int32_t cur = op(b, NAME("l%d.ffn_norm%s", l, sfx), SCHED_OP_RMS_NORM, x, -1);
    cur = op(b, NAME("l%d.ffn_norm_w%s", l, sfx), SCHED_OP_MUL, cur, norm_w);
    int32_t gate = op(b, NAME("l%d.ffn_gate%s", l, sfx), SCHED_OP_MUL_MAT, wg, cur);
    int32_t up = op(b, NAME("l%d.ffn_up%s", l, sfx), SCHED_OP_MUL_MAT, wu, cur);
    gate = op(b, NAME("l%d.ffn_silu%s", l, sfx), SCHED_OP_SILU, gate, -1);
    int32_t par = op(b, NAME("l%d.ffn_par%s", l, sfx), SCHED_OP_MUL, gate, up);
    return op(b, NAME("l%d.ffn_out%s", l, sfx), SCHED_OP_MUL_MAT, wd, par);
}

/* MoE feed-forward (llama.cpp's build_moe_ffn, top-k routing): n_expert
 * experts per layer, each token through n_expert_used of them, named by
 * the i32 input l.ffn_ids [U, T] (the router's top-k, deterministic from
 * the seed). The expert weights stay in host memory (on the CPU), as
 * llama.cpp's --cpu-moe / -ot exps=CPU keeps them, so they are split
 * inputs of the GPU splits that ggml's op_offload gives the mul_mat_id.
 * The U expert outputs are joined by a mul_mat with blk.L.ffn_comb, which
 * stands for the router-weighted sum (the graph has no strided views). */
static int32_t moe_feed_forward(builder *b, const sched_model_params *p, int l, int dev,
                                int32_t x, int T)
{
    char nm[SCHED_NAME_MAX];
    int64_t E = p->n_embd, F = p->n_ff, X = p->n_expert, U = p->n_expert_used;
    int32_t norm_w = leaf(b, NAME("blk.%d.ffn_norm", l), SCHED_F32, 1, E, 1, 1,
                          SCHED_FLAG_WEIGHT, dev);
    int32_t ids = leaf(b, NAME("l%d.ffn_ids", l), SCHED_I32, 2, U, T, 1, SCHED_FLAG_INPUT, -1);
    int32_t wg = leaf(b, NAME("blk.%d.ffn_gate_exps", l), p->dtype, 3, E, F, X, SCHED_FLAG_WEIGHT, -1);
    int32_t wu = leaf(b, NAME("blk.%d.ffn_up_exps", l), p->dtype, 3, E, F, X, SCHED_FLAG_WEIGHT, -1);
    int32_t wd = leaf(b, NAME("blk.%d.ffn_down_exps", l), p->dtype, 3, F, E, X, SCHED_FLAG_WEIGHT, -1);
    int32_t wc = leaf(b, NAME("blk.%d.ffn_comb", l), p->dtype, 2, E * U, E, 1, SCHED_FLAG_WEIGHT, dev);
    int32_t cur = op(b, NAME("l%d.ffn_norm", l), SCHED_OP_RMS_NORM, x, -1);
    cur = op(b, NAME("l%d.ffn_norm_w", l), SCHED_OP_MUL, cur, norm_w);
    cur = view(b, NAME("l%d.ffn_norm_3d", l), SCHED_OP_RESHAPE, cur, 3, E, 1, T, 0);
    int32_t s3[3] = { wg, cur, ids };
    int32_t gate = b->failed ? -1 : sched_graph_op(b->g, NAME("l%d.ffn_gate_exps", l), SCHED_OP_MUL_MAT_ID, s3, 3);
    s3[0] = wu;
    int32_t up = b->failed ? -1 : sched_graph_op(b->g, NAME("l%d.ffn_up_exps", l), SCHED_OP_MUL_MAT_ID, s3, 3);
    if (gate < 0 || up < 0) {
        b->failed = true;
        return 0;
    }
    gate = op(b, NAME("l%d.ffn_silu", l), SCHED_OP_SILU, gate, -1);
    int32_t par = op(b, NAME("l%d.ffn_par", l), SCHED_OP_MUL, gate, up);
    s3[0] = wd;
    s3[1] = par;
    int32_t down = b->failed ? -1 : sched_graph_op(b->g, NAME("l%d.ffn_down_exps", l), SCHED_OP_MUL_MAT_ID, s3, 3);
    if (down < 0) {
        b->failed = true;
        return 0;
    }
    cur = view(b, NAME("l%d.ffn_moe_2d", l), SCHED_OP_RESHAPE, down, 2, E * U, T, 1, 0);
    return op(b, NAME("l%d.ffn_out", l), SCHED_OP_MUL_MAT, wc, cur);
}

/* Tensor split: a shard's nodes without a weight are pinned to the shard's
 * device as a user assignment (GPU d is backend d). Expansion would drag
 * the first norm of a shard onto the previous shard's device, whose
 * stream then copies it after entering the all-reduce: a deadlock. */
static void pin_shard(builder *b, int32_t from, int dev)
{
    if (b->failed)
        return;
    for (int32_t i = from; i < b->g->n_tensors; i++) {
        sched_tensor *t = &b->g->tensors[i];
        if (t->op == SCHED_OP_NONE || sched_op_is_view(t->op))
            continue;
        bool weighted = false;
        for (int k = 0; k < SCHED_MAX_SRC; k++)
            if (t->src[k] >= 0 &&
                (b->g->tensors[t->src[k]].flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE)))
                weighted = true;
        if (!weighted)
            t->user_backend = dev;
    }
}

static sched_graph *build_llama(const sched_model_params *p, int T)
{
    bool moe = strcmp(p->kind, "moe") == 0;
    builder b = { sched_graph_new(p->split_mode == SCHED_SPLIT_TENSOR ? "tp" : moe ? "moe" : "llama"),
                  false };
    if (!b.g)
        return NULL;
    char nm[SCHED_NAME_MAX];
    int64_t E = p->n_embd;
    int nd = p->n_devices > 0 ? p->n_devices : 1;
    bool tp = p->split_mode == SCHED_SPLIT_TENSOR;
    /* Layer split over processes: this rank's stage only, on device 0. */
    bool stage = !tp && p->one_rank;
    int l_lo = 0, l_hi = p->n_layer;
    if (stage) {
        sched_model_stage(p, p->rank, nd, &l_lo, &l_hi);
        b.g->rank = p->rank;
        b.g->world = nd;
    }
    bool first = !stage || p->rank == 0, last = !stage || p->rank == nd - 1;
    int32_t tokens = first ? leaf(&b, "inp_tokens", SCHED_I32, 1, T, 1, 1, SCHED_FLAG_INPUT, -1)
                           : -1;
    int32_t inp_pos = leaf(&b, "inp_pos", SCHED_I32, 1, T, 1, 1, SCHED_FLAG_INPUT, -1);
    int32_t kq_mask = leaf(&b, "kq_mask", SCHED_F32, 2, p->n_ctx, T, 1, SCHED_FLAG_INPUT, -1);
    int32_t x;
    if (first) {
        int32_t tok_embd = leaf(&b, "tok_embd", p->dtype, 2, E, p->n_vocab, 1, SCHED_FLAG_WEIGHT,
                                -1);
        x = op(&b, "inp_embd", SCHED_OP_GET_ROWS, tok_embd, tokens);
    } else {
        x = leaf(&b, "inp_act", SCHED_F32, 2, E, T, 1, SCHED_FLAG_INPUT, -1);
    }
    int32_t xs[16];
    for (int d = 0; d < 16; d++)
        xs[d] = x;
    /* Tensor split over processes: this rank's shard only, on device 0. */
    bool one = tp && p->one_rank;
    int d_lo = one ? p->rank : 0, d_hi = one ? p->rank + 1 : nd;
    if (one) {
        b.g->rank = p->rank;
        b.g->world = nd;
    }
    int group = 0;
    for (int l = 0; l < p->n_layer && !b.failed; l++) {
        if (!tp) {
            if (l < l_lo || l >= l_hi)
                continue;
            int dev = stage ? 0 : l * nd / p->n_layer;
            int32_t attn = attention(&b, p, l, dev, "", x, inp_pos, kq_mask, p->n_head,
                                     p->n_head_kv, T);
            int32_t ffn_inp = op(&b, NAME("l%d.ffn_inp", l), SCHED_OP_ADD, attn, x);
            int32_t ffn = moe ? moe_feed_forward(&b, p, l, dev, ffn_inp, T)
                              : feed_forward(&b, p, l, dev, "", ffn_inp, p->n_ff);
            x = op(&b, NAME("l%d.out", l), SCHED_OP_ADD, ffn, ffn_inp);
            continue;
        }
        int32_t h[16];
        char sfx[16];
        for (int d = d_lo; d < d_hi && d < 16; d++) {
            int dev = one ? 0 : d;
            snprintf(sfx, sizeof sfx, "@%d", d);
            int32_t from = b.g->n_tensors;
            int32_t part = attention(&b, p, l, dev, sfx, xs[d], inp_pos, kq_mask, p->n_head / nd,
                                     p->n_head_kv / nd, T);
            if (one && p->skip_first_allreduce && l == 0) {
                h[d] = part;        /* the seeded bug: no all-reduce on this rank */
                pin_shard(&b, from, dev);
                continue;
            }
            int32_t ar = op(&b, NAME("l%d.attn_ar@%d", l, d), SCHED_OP_ALL_REDUCE, part, -1);
            if (!b.failed)
                b.g->tensors[ar].param = group;
            h[d] = ar;
            pin_shard(&b, from, dev);
        }
        group++;
        for (int d = d_lo; d < d_hi && d < 16; d++) {
            int dev = one ? 0 : d;
            snprintf(sfx, sizeof sfx, "@%d", d);
            int32_t from = b.g->n_tensors;
            h[d] = op(&b, NAME("l%d.ffn_inp@%d", l, d), SCHED_OP_ADD, h[d], xs[d]);
            int32_t part = feed_forward(&b, p, l, dev, sfx, h[d], p->n_ff / nd);
            int32_t ar = op(&b, NAME("l%d.ffn_ar@%d", l, d), SCHED_OP_ALL_REDUCE, part, -1);
            if (!b.failed)
                b.g->tensors[ar].param = group;
            xs[d] = op(&b, NAME("l%d.out@%d", l, d), SCHED_OP_ADD, ar, h[d]);
            pin_shard(&b, from, dev);
        }
        group++;
    }
    /* Every rank ends with the same bits after the last all-reduce: the
     * head of the whole graph reads rank 0's, a rank's part its own. */
    if (tp)
        x = xs[d_lo];
    if (!last) {                /* an earlier stage: its activation goes on */
        if (b.failed) {
            sched_graph_free(b.g);
            return NULL;
        }
        b.g->tensors[x].flags |= SCHED_FLAG_OUTPUT;
        return b.g;
    }
    int out_dev = tp || stage ? 0 : nd - 1;
    int32_t onorm = leaf(&b, "output_norm", SCHED_F32, 1, E, 1, 1, SCHED_FLAG_WEIGHT, out_dev);
    int32_t out_w = leaf(&b, "output", p->dtype, 2, E, p->n_vocab, 1, SCHED_FLAG_WEIGHT, out_dev);
    int32_t from = b.g->n_tensors;
    int32_t cur = op(&b, "result_norm", SCHED_OP_RMS_NORM, x, -1);
    if (tp)
        pin_shard(&b, from, 0);
    cur = op(&b, "result_norm_w", SCHED_OP_MUL, cur, onorm);
    cur = op(&b, "result_output", SCHED_OP_MUL_MAT, out_w, cur);
    if (b.failed) {
        sched_graph_free(b.g);
        return NULL;
    }
    b.g->tensors[cur].flags |= SCHED_FLAG_OUTPUT;
    return b.g;
}

void sched_model_stage(const sched_model_params *p, int rank, int n_stages, int *lo, int *hi)
{
    /* build_llama's device of layer l: l * n_devices / n_layer. */
    *lo = *hi = 0;
    int l = 0;
    while (l < p->n_layer && (int)((int64_t)l * n_stages / p->n_layer) < rank)
        l++;
    *lo = l;
    while (l < p->n_layer && (int)((int64_t)l * n_stages / p->n_layer) == rank)
        l++;
    *hi = l;
}

sched_graph *sched_model_build(const sched_model_params *p, int n_tokens)
{
    if (n_tokens < 1 || n_tokens > p->n_ctx)
        return NULL;
    if (strcmp(p->kind, "mlp") == 0)
        return build_mlp(p, n_tokens);
    if (p->split_mode == SCHED_SPLIT_TENSOR &&
        (p->n_devices > 16 || (p->one_rank && (p->rank < 0 || p->rank >= p->n_devices))))
        return NULL;
    if (p->one_rank && (p->rank < 0 || p->rank >= p->n_devices))
        return NULL;
    return build_llama(p, n_tokens);
}
