#!/usr/bin/env python3
"""derive_captures.py -- inputs derived from the public captures (issue 31).

Every input the importer tests of issue 31 use is built here, at test time,
from a real capture (../shared/external-traces, tests/data/external): events
removed, duplicated or reshaped, older Kineto shapes, ranks without their
metadata, a second process, another accelerator. Nothing is invented beyond
what each recipe says; each recipe names the capture it starts from.

    derive_captures.py SHARED EXTERNAL OUT             the named inputs below
    derive_captures.py SHARED EXTERNAL OUT sweep       also OUT/sweep/BASE/*.json: the
                                                       reshapes of each base
    derive_captures.py SHARED EXTERNAL OUT sweep-full  the reshapes, and every event and
                                                       execution-trace node removed, every
                                                       event duplicated

SHARED is the folder of the public captures (external-traces), EXTERNAL the
repository's tests/data/external, OUT a directory (made if missing). Each
input is OUT/NAME.json (plain JSON) and, where its execution trace changed,
OUT/NAME.et.json; OUT/manifest.json lists them: {NAME: {"trace": PATH,
"et": PATH or null}}. The sweep writes OUT/sweep/manifest.json the same way.

Python's json, gzip and sqlite3 modules only; no syncsim code.
"""
import copy
import gzip
import json
import os
import shutil
import sqlite3
import sys

# The ET pair: the one public capture with byte ranges (an execution trace).
ET_PAIR = "hta-simple-add-et-kineto.json.gz"
ET_FILE = "hta-simple-add-et.json.gz"


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def save(doc, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)


def events(doc):
    return doc["traceEvents"]


def find(doc, cat, name=None, corr=None):
    """The complete events of a category, by name prefix and correlation."""
    out = []
    for e in events(doc):
        if e.get("ph") != "X" or e.get("cat") != cat:
            continue
        if name is not None and not e.get("name", "").startswith(name):
            continue
        if corr is not None and e.get("args", {}).get("correlation") != corr:
            continue
        out.append(e)
    return out


def one(doc, cat, name=None, corr=None):
    found = find(doc, cat, name, corr)
    assert len(found) == 1, (cat, name, corr, len(found))
    return found[0]


def call(ts, dur, name, corr, pid=563677, tid=563677):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid, "ts": ts,
            "dur": dur, "args": {"External id": corr, "correlation": corr}}


def sync_row(ts, kind, corr, stream, **more):
    args = {"cuda_sync_kind": kind, "stream": stream, "correlation": corr, "device": 0}
    args.update(more)
    return {"ph": "X", "cat": "cuda_sync", "name": kind, "pid": 0, "tid": stream, "ts": ts,
            "dur": 1, "args": args}


def cpu_op(ts, dur, name, rf, pid=563677, tid=563677):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": tid, "ts": ts,
            "dur": dur, "args": {"External id": rf}}


def et_node(node_id, rf, name, schema, inputs, input_types, outputs, output_types):
    return {"id": node_id, "rf_id": rf, "parent": 14, "name": name, "op_schema": schema,
            "inputs": inputs, "input_types": input_types, "outputs": outputs,
            "output_types": output_types}


# ---------------------------------------------------------------------------
# Bases with a finding, reshaped from the ET pair. Each moves the first
# aten::add kernel (correlation 53, reading tensors 6 and 11 that the two
# uniform_ kernels 22 and 39 wrote on stream 7) to stream 20, and orders it
# too little:

def base_wrong_stream_sync(k):
    """The cudaDeviceSynchronize before the add (correlation 46) becomes a
    cudaStreamSynchronize of stream 20, with its "Stream Sync" row: it does
    not cover stream 7, so the add reads what the uniform_ kernels wrote,
    unordered (RAW races)."""
    move_add(k)
    s = one(k, "cuda_runtime", "cudaDeviceSynchronize", 46)
    s["name"] = "cudaStreamSynchronize"
    events(k).append(sync_row(s["ts"] + 1, "Stream Sync", 46, 20))


def base_record_too_early(k):
    """The add waits (cudaStreamWaitEvent 46, a full "Stream Wait Event"
    row) for an event recorded on stream 7 after the first uniform_ kernel
    only (cudaEventRecord 30, between the launches 22 and 39): the second
    uniform_ kernel's write of tensor 11 races with the add's read."""
    move_add(k)
    s = one(k, "cuda_runtime", "cudaDeviceSynchronize", 46)
    s["name"] = "cudaStreamWaitEvent"
    events(k).append(call(1689360808079400, 5, "cudaEventRecord", 30))
    events(k).append(sync_row(s["ts"] + 1, "Stream Wait Event", 46, 20, wait_on_stream=7,
                              wait_on_cuda_event_record_corr_id=30, wait_on_cuda_event_id=1))


def base_host_read(k, et, synced):
    """A non_blocking device-to-host copy (aten::copy_ of tensor 6 into a
    CPU tensor 200, launched by cudaMemcpyAsync 44 on stream 7, "Memcpy DtoH
    (Device -> Pinned)") and a host aten::sum of tensor 200. Before the
    cudaDeviceSynchronize 46 (synced False) the host read races with the
    copy's write; after it (synced True) the sync protects it."""
    base = 1689360808130000
    events(k).extend([
        cpu_op(base, 50, "aten::copy_", 100),
        call(base + 10, 10, "cudaMemcpyAsync", 44),
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0,
         "tid": 7, "ts": base + 100, "dur": 20,
         "args": {"External id": 44, "device": 0, "stream": 7, "correlation": 44,
                  "bytes": 262144}},
    ])
    at = 1689360808135030 if synced else base + 200
    events(k).append(cpu_op(at, 20, "aten::sum", 101))
    et["nodes"].extend([
        et_node(900, 100, "aten::copy_",
                "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
                [[200, 201, 0, 65536, 4, "cpu"], [6, 7, 0, 65536, 4, "cuda:0"], True],
                ["Tensor(float)", "Tensor(float)", "Bool"],
                [[200, 201, 0, 65536, 4, "cpu"]], ["Tensor(float)"]),
        et_node(901, 101, "aten::sum",
                "aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor",
                [[200, 201, 0, 65536, 4, "cpu"], "<None>"], ["Tensor(float)", "None"],
                [[202, 203, 0, 1, 4, "cpu"]], ["Tensor(float)"]),
    ])


def move_add(k):
    kern = one(k, "kernel", corr=53)
    kern["args"]["stream"] = 20
    kern["tid"] = 20


# ---------------------------------------------------------------------------
# The named inputs: one per class of issue 31 (and the bases).

# The bases the sweep starts from: each has a finding.
BASES = ("race-wrong-stream-sync", "race-record-too-early", "race-host-read")

# The inputs derived from the ET pair, which are imported with its ET (or
# their own, when they changed it).
WITH_ET = BASES + (
    "host-read-synced", "launch-without-kernel", "kernel-ph-x", "kernel-ph-i", "kernel-ph-Z",
    "kernel-cat-gpu_user_annotation", "kernel-cat-python_function",
    "race-wrong-stream-sync-no-row", "race-record-too-early-no-record-corr",
    "race-record-too-early-no-record-call", "gpu-events-twice", "kernel-ts-twice",
    "kernel-fractional-correlation", "kernel-negative-device", "et-negative-offset",
    "pair-array")


def named_inputs(shared, external):
    """Yields (name, kineto doc, et doc or None: the original ET)."""
    pair = load(os.path.join(shared, ET_PAIR))
    et = load(os.path.join(shared, ET_FILE))

    k = copy.deepcopy(pair)
    base_wrong_stream_sync(k)
    yield "race-wrong-stream-sync", k, None
    k = copy.deepcopy(pair)
    base_record_too_early(k)
    yield "race-record-too-early", k, None
    for synced in (False, True):
        k, e = copy.deepcopy(pair), copy.deepcopy(et)
        base_host_read(k, e, synced)
        yield "host-read-synced" if synced else "race-host-read", k, e

    # A launch whose kernel is missing: the add kernel 53 removed.
    k = copy.deepcopy(pair)
    events(k).remove(one(k, "kernel", corr=53))
    yield "launch-without-kernel", k, None

    # GPU work under an ignored shape: the add kernel 53 as ph x, i, Z and
    # in categories gpu_user_annotation, python_function.
    for ph in ("x", "i", "Z"):
        k = copy.deepcopy(pair)
        one(k, "kernel", corr=53)["ph"] = ph
        yield "kernel-ph-" + ph, k, None
    for cat in ("gpu_user_annotation", "python_function"):
        k = copy.deepcopy(pair)
        one(k, "kernel", corr=53)["cat"] = cat
        yield "kernel-cat-" + cat, k, None

    # Older Kineto: no "Stream Sync" rows (the stream sync widened), and a
    # wait row without wait_on_cuda_event_record_corr_id.
    k = copy.deepcopy(pair)
    base_wrong_stream_sync(k)
    events(k).remove(one(k, "cuda_sync", "Stream Sync", 46))
    yield "race-wrong-stream-sync-no-row", k, None
    k = copy.deepcopy(pair)
    base_record_too_early(k)
    del one(k, "cuda_sync", "Stream Wait Event", 46)["args"]["wait_on_cuda_event_record_corr_id"]
    yield "race-record-too-early-no-record-corr", k, None
    events(k).remove(one(k, "cuda_runtime", "cudaEventRecord", 30))
    yield "race-record-too-early-no-record-call", k, None
    simple = load(os.path.join(shared, "hta-simple-add.json.gz"))
    k = copy.deepcopy(simple)
    k["traceEvents"] = [e for e in events(k)
                        if not (e.get("cat") == "cuda_sync" and e.get("name") == "Stream Sync")]
    yield "simple-add-no-stream-sync-rows", k, None
    k = copy.deepcopy(simple)
    rows = find(k, "cuda_sync", "Stream Wait Event")
    for r in rows[:5]:
        events(k).remove(r)
    yield "simple-add-five-wait-rows-removed", k, None

    # Duplicates and values.
    k = copy.deepcopy(pair)
    gpu = [e for e in events(k) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    events(k).extend(copy.deepcopy(gpu))
    yield "gpu-events-twice", k, None
    k = copy.deepcopy(pair)
    yield "kernel-ts-twice", k, None  # written with a duplicate key (write_dup_key)
    k = copy.deepcopy(pair)
    one(k, "kernel", corr=53)["args"]["correlation"] = 53.5
    yield "kernel-fractional-correlation", k, None
    k = copy.deepcopy(pair)
    one(k, "kernel", corr=53)["args"]["device"] = -1
    yield "kernel-negative-device", k, None
    k, e = copy.deepcopy(pair), copy.deepcopy(et)
    for n in e["nodes"]:
        if n.get("rf_id") == 22:
            n["inputs"][0][2] = -5
    yield "et-negative-offset", k, e

    # Another accelerator; two processes in one file.
    sync = load(os.path.join(shared, "hta-event-sync-multi-stream.json.gz"))
    k = copy.deepcopy(sync)
    for e in events(k):
        if e.get("cat") == "cuda_runtime":
            e["cat"] = "xpu_runtime"
            e["name"] = e["name"].replace("cuda", "ur")
    yield "xpu-style", k, None
    k = copy.deepcopy(sync)
    for e in find(k, "cuda_runtime"):
        if e["args"]["correlation"] % 2:
            e["pid"] = e["pid"] + 1
    yield "two-processes", k, None

    # Ranks: rank 0 of the real 128-rank job without world_size, its NCCL
    # kernels saying their group's size (newer Kineto), and with rank -1.
    r0 = load(os.path.join(external, "sampled_rank-0.json.gz"))
    k = copy.deepcopy(r0)
    del k["distributedInfo"]["world_size"]
    for e in find(k, "kernel", "nccl"):
        e["args"]["Group size"] = 128
    yield "rank0-no-world-size", k, None
    k = copy.deepcopy(r0)
    k["distributedInfo"]["rank"] = -1
    yield "rank0-rank-minus-one", k, None
    # GPU work whose call is missing, in a capture of two host threads (its
    # text export must say by= on every stream statement)
    k = copy.deepcopy(r0)
    events(k).remove(find(k, "cuda_runtime", "cudaLaunchKernel")[0])
    yield "rank0-launch-removed", k, None
    r1 = load(os.path.join(external, "sampled_rank-1.json.gz"))
    k = copy.deepcopy(r1)
    k["distributedInfo"]["pg_config"] = [{"pg_name": "0", "pg_desc": "default_pg",
                                          "backend_config": "cuda:nccl", "pg_size": 128}]
    yield "rank1-with-pg-config", k, None
    k = copy.deepcopy(r1)
    k["distributedInfo"]["backend"] = "gloo"
    yield "rank1-other-backend", k, None

    # Paths and words: the ET pair's Kineto trace as a bare array of events
    # (the Chrome trace's other form), with timestamps past 2^62 ns.
    k = copy.deepcopy(pair)
    yield "pair-array", events(k), None
    k = copy.deepcopy(pair)
    for e in events(k):
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = e["ts"] + 5000000000000000
    yield "pair-ts-past-2-62", k, None


def write_dup_key(path):
    """kernel-ts-twice: the add kernel's "ts" written twice, as text (a
    dict cannot hold it)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    doc = json.loads(text)
    k = one(doc, "kernel", corr=53)
    old = json.dumps(k)
    assert old in text
    text = text.replace(old, old.replace('"ts": ', '"ts": 1, "ts": ', 1))
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def derived_files(shared, external, out):
    """The named inputs as files, and the byte-level ones: a BOM, an empty
    file, a truncated gzip, a truncated nsys export, nameless and open rows."""
    os.makedirs(out, exist_ok=True)
    manifest = {}
    for name, k, e in named_inputs(shared, external):
        path = os.path.join(out, name + ".json")
        save(k, path)
        et = None
        if e is not None:
            et = os.path.join(out, name + ".et.json")
            save(e, et)
        elif name in WITH_ET:
            et = os.path.join(shared, ET_FILE)
        manifest[name] = {"trace": path, "et": et}
    write_dup_key(manifest["kernel-ts-twice"]["trace"])

    pair = os.path.join(shared, ET_PAIR)
    with gzip.open(pair, "rb") as f:
        raw = f.read()
    path = os.path.join(out, "pair-bom.json")
    with open(path, "wb") as f:
        f.write(b"\xef\xbb\xbf" + raw)
    manifest["pair-bom"] = {"trace": path, "et": os.path.join(shared, ET_FILE)}
    path = os.path.join(out, "empty.json")
    open(path, "wb").close()
    manifest["empty"] = {"trace": path, "et": None}
    simple = os.path.join(shared, "hta-simple-add.json.gz")
    with open(simple, "rb") as f:
        head = f.read(2000)
    path = os.path.join(out, "simple-add-truncated.json.gz")
    with open(path, "wb") as f:
        f.write(head)
    manifest["simple-add-truncated"] = {"trace": path, "et": None}

    nsys = os.path.join(shared, "pipit-cloverleaf-nsys.sqlite")
    with open(nsys, "rb") as f:
        head = f.read(1 << 20)
    path = os.path.join(out, "cloverleaf-truncated.sqlite")
    with open(path, "wb") as f:
        f.write(head)
    manifest["cloverleaf-truncated"] = {"trace": path, "et": None}
    # a runtime row whose name id names no string; an NVTX range still open
    path = os.path.join(out, "cloverleaf-nameless-open-nvtx.sqlite")
    shutil.copyfile(nsys, path)
    db = sqlite3.connect(path)
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = -77 WHERE rowid = "
               "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = "
               "(SELECT MAX(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME))")
    db.execute("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType "
               "INTEGER NOT NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, "
               "globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, "
               "uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, "
               "int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT)")
    gtid = db.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1").fetchone()[0]
    start = db.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES "
               "(?, NULL, 59, 'open range', ?)", (start, gtid))
    db.commit()
    db.close()
    manifest["cloverleaf-nameless-open-nvtx"] = {"trace": path, "et": None}

    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    return manifest


# ---------------------------------------------------------------------------
# The sweep: from each base with a finding, one input per single change.

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def sweep_of(name, k, et, full):
    """Yields (label, kineto doc, et doc): every GPU event reshaped (ph i,
    category gpu_user_annotation; when full also ph x, Z, B and category
    python_function), every sync row's fields removed one at a time, all GPU
    events twice, and the older shapes: no cuda_sync rows, no Stream Sync
    rows; when full, also every event removed, every event duplicated and
    every ET node removed."""
    evs = events(k)
    for i in range(len(evs)):
        if full:
            d = copy.deepcopy(k)
            del events(d)[i]
            yield "remove-%d" % i, d, et
            d = copy.deepcopy(k)
            events(d).insert(i, copy.deepcopy(evs[i]))
            yield "twice-%d" % i, d, et
        if evs[i].get("cat") in GPU_CATS:
            for ph in ("x", "i", "Z", "B") if full else ("i",):
                d = copy.deepcopy(k)
                events(d)[i]["ph"] = ph
                yield "ph-%s-%d" % (ph, i), d, et
            for cat in ("gpu_user_annotation", "python_function") if full else \
                    ("gpu_user_annotation",):
                d = copy.deepcopy(k)
                events(d)[i]["cat"] = cat
                yield "cat-%s-%d" % (cat, i), d, et
        if evs[i].get("cat") == "cuda_sync":
            for field in ("stream", "wait_on_stream", "wait_on_cuda_event_record_corr_id",
                          "wait_on_cuda_event_id", "correlation"):
                if field in evs[i].get("args", {}):
                    d = copy.deepcopy(k)
                    del events(d)[i]["args"][field]
                    yield "no-%s-%d" % (field, i), d, et
    if et is not None and full:
        for i in range(len(et["nodes"])):
            e = copy.deepcopy(et)
            del e["nodes"][i]
            yield "et-remove-%d" % i, k, e
    d = copy.deepcopy(k)
    events(d).extend(copy.deepcopy([e for e in evs if e.get("cat") in GPU_CATS]))
    yield "gpu-twice", d, et
    d = copy.deepcopy(k)
    d["traceEvents"] = [e for e in evs if e.get("cat") != "cuda_sync"]
    yield "no-sync-rows", d, et
    d = copy.deepcopy(k)
    d["traceEvents"] = [e for e in evs if e.get("name") != "Stream Sync"]
    yield "no-stream-sync-rows", d, et


def sweep_files(shared, external, out, full):
    bases = {}
    for name, k, e in named_inputs(shared, external):
        if name in BASES:
            bases[name] = (k, e)
    et_default = load(os.path.join(shared, ET_FILE))
    manifest = {}
    for base, (k, e) in sorted(bases.items()):
        folder = os.path.join(out, "sweep", base)
        os.makedirs(folder, exist_ok=True)
        base_et = e if e is not None else et_default
        et_path = os.path.join(folder, "base.et.json")
        save(base_et, et_path)
        for label, d, de in sweep_of(base, k, copy.deepcopy(base_et), full):
            path = os.path.join(folder, label + ".json")
            save(d, path)
            this_et = et_path
            if de is not None and de != base_et:
                this_et = os.path.join(folder, label + ".et.json")
                save(de, this_et)
            manifest["%s/%s" % (base, label)] = {"trace": path, "et": this_et}
    with open(os.path.join(out, "sweep", "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def main(argv):
    if len(argv) not in (4, 5) or (len(argv) == 5 and argv[4] not in ("sweep", "sweep-full")):
        sys.stderr.write(__doc__)
        return 2
    shared, external, out = argv[1], argv[2], argv[3]
    derived_files(shared, external, out)
    if len(argv) == 5:
        sweep_files(shared, external, out, argv[4] == "sweep-full")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
