#!/usr/bin/env python3
"""ledger_count.py -- the import ledger of a capture, counted without syncsim.

    ledger_count.py CAPTURE [--et ET]
    ledger_count.py --list FILE       one line "CAPTURE ET" (ET "-" for none) per
                                      capture; prints one object per line

Reads a PyTorch profiler (Kineto) trace -- JSON or gzipped JSON, an object
with traceEvents or a bare array of events -- and its execution trace, or an
Nsight Systems SQLite export, and prints one JSON object:

    {"read": N, "ignored": N, "counted": {"REASON": N, ...}}

counting each event once, under the first reason the rules of
docs/importers.md ("The import ledger") give it. It shares no code with
syncsim: tests/traces/test_import_assumptions.c compares what it prints with
`syncsim info --json`. It counts the reasons of issue 31's classes and the
ones the public captures hold (those it does not know are never counted, so
a capture that holds one shows as a difference).

Python's json, gzip and sqlite3 modules only.
"""
import gzip
import json
import re
import sqlite3
import sys
from collections import Counter

UNKNOWN = (-1, 4294967295, 18446744073709551615)

CALL = {"cuda_runtime", "cuda_driver", "Runtime"}
GPU = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
       "gpu_memset": "memset", "Memset": "memset"}
SYNC = {"cuda_sync"}
OPS = {"cpu_op", "Operator"}
ANNOTATIONS = {"user_annotation"}
FLOWS = {"ac2g", "async"}
RANGES = {"cuda_profiler_range"}
IGNORED = {"gpu_user_annotation", "python_function", "cpu_instant_event", "overhead", "Trace",
           "external_correlation", "fwdbwd", "Python"}

STREAM_SYNC = {"cudaStreamSynchronize", "cuStreamSynchronize", "hipStreamSynchronize"}
EVENT_SYNC = {"cudaEventSynchronize", "cuEventSynchronize", "hipEventSynchronize"}
STREAM_WAIT = {"cudaStreamWaitEvent", "cuStreamWaitEvent", "hipStreamWaitEvent"}
RECORDS = {"cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord",
           "cuEventRecordWithFlags", "hipEventRecord", "hipEventRecordWithFlags"}
LAUNCH = re.compile(r"^(cudaLaunch|cuLaunch|hipLaunch|hipExtLaunch|hipModuleLaunch|cudaGraphLaunch"
                    r"|cuGraphLaunch|hipGraphLaunch|cudaMemcpy|cuMemcpy|hipMemcpy|cudaMemset"
                    r"|cuMemset|hipMemset)")


def base_name(name):
    """cudaLaunchKernel_v7000 -> cudaLaunchKernel; ..._ptsz -> ..."""
    while True:
        m = re.match(r"^(.*)_v\d+$", name) or re.match(r"^(.*)_(ptsz|ptds)$", name)
        if not m:
            return name
        name = m.group(1)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def integer(v):
    """An integer field: an int, a float of a whole value, a numeric string;
    else None."""
    if is_int(v):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"-?\d+", v):
        return int(v)
    return None


def valid(v):
    return v is not None and v >= 0 and v not in UNKNOWN


class Obj(dict):
    """A JSON object that knows whether it (or one inside it) names a
    member twice."""
    dup = False


def pairs(items):
    o = Obj(items)
    o.dup = len(o) != len(items) or any(getattr(v, "dup", False) for _, v in items) or any(
        isinstance(v, list) and any(getattr(x, "dup", False) for x in v) for _, v in items)
    return o


def load_json(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw[:3] == b"\xef\xbb\xbf":
        raw = raw[3:]
    return json.loads(raw.decode("utf-8"), object_pairs_hook=pairs)


# ---------------------------------------------------------------------------
# Kineto.

def kineto(path, et_path):
    doc = load_json(path)
    evs = doc if isinstance(doc, list) else doc.get("traceEvents", [])
    dist = {} if isinstance(doc, list) else doc.get("distributedInfo", {}) or {}
    world = integer(dist.get("world_size")) if isinstance(dist, dict) else None
    read, ignored = len(evs), 0
    counted = Counter()
    fate = {}                   # event index -> reason (counted) or "ok"

    def count(i, why):
        """Event i is counted under why, unless it was counted already."""
        if fate.get(i, "ok") == "ok":
            fate[i] = why
            counted[why] += 1

    calls, gpus, syncs, ops, annotations = {}, [], [], [], []
    work_seen = set()
    seen_gpu, seen_call, seen_sync, seen_range = set(), set(), set(), set()
    stream_wait_rows = False
    for i, e in enumerate(evs):
        if not isinstance(e, dict):
            count(i, "bad-type")
            continue
        ph, cat = e.get("ph"), e.get("cat")
        if ph is None:
            count(i, "missing-field")
            continue
        if not isinstance(ph, str):
            count(i, "bad-type")
            continue
        if cat in FLOWS and ph in ("s", "f", "t"):
            ts = e.get("ts")    # a flow's end is placed by its time
            if ph == "f" and isinstance(ts, (int, float)) and abs(ts) * 1000 > 2 ** 62:
                count(i, "bad-ts")
            fate.setdefault(i, "ok")
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        corr = integer(args.get("correlation"))     # a fraction is no correlation
        shaped = corr is not None and integer(args.get("stream")) is not None
        if shaped:
            work_seen.add(corr)
        if getattr(e, "dup", False):
            count(i, "duplicate-key")
            continue
        if ph != "X":
            if shaped:
                count(i, "ignored-gpu-work")
            elif ph in ("B", "E", "b", "e"):
                count(i, "unknown-category")
            else:
                ignored += 1
                fate[i] = "ignored"
            continue
        if cat in IGNORED:
            if shaped:
                count(i, "ignored-gpu-work")
            else:
                ignored += 1
                fate[i] = "ignored"
            continue
        known = CALL | set(GPU) | SYNC | OPS | ANNOTATIONS | RANGES
        if cat not in known:
            count(i, "bad-type" if cat is not None and not isinstance(cat, str)
                  else "unknown-category")
            continue
        ts = e.get("ts")
        if ts is None:
            count(i, "no-ts")
            continue
        if not isinstance(ts, (int, float)) or abs(ts) * 1000 > 2 ** 62:
            count(i, "bad-ts" if isinstance(ts, (int, float, str)) else "bad-type")
            continue
        dur = e.get("dur")
        if dur is None:
            count(i, "no-dur")
            dur = 0
        name = e.get("name") if isinstance(e.get("name"), str) else "?"
        pid, tid = e.get("pid"), e.get("tid")
        if cat in CALL:
            if pid is None or tid is None:
                count(i, "missing-field")
                continue
            key = (corr, ts, dur, name, pid, tid)
            if corr is not None and key in seen_call:
                count(i, "duplicate")
                continue
            seen_call.add(key)
            if corr is not None and corr not in calls:
                calls[corr] = {"i": i, "name": base_name(name), "ts": ts, "dur": dur,
                               "pid": pid, "tid": tid}
            fate.setdefault(i, "ok")
        elif cat in GPU:
            device = integer(args.get("device"))
            if device is not None and (device < 0 or device > 4096):
                count(i, "bad-number")
                continue
            if isinstance(args.get("correlation"), float) and \
                    args["correlation"] != int(args["correlation"]):
                count(i, "bad-number")     # imported all the same, by its flow
            key = (GPU[cat], device, args.get("stream", tid), corr, ts, dur, name,
                   args.get("bytes"))
            if key in seen_gpu:
                count(i, "duplicate")
                continue
            seen_gpu.add(key)
            gpus.append({"i": i, "kind": GPU[cat], "corr": corr, "name": name, "ts": ts,
                         "pid": pid, "tid": tid, "args": args})
            fate.setdefault(i, "ok")
        elif cat in SYNC:
            kind = args.get("cuda_sync_kind", name)
            key = (corr, ts, dur, kind, args.get("stream"), args.get("wait_on_cuda_event_id"),
                   args.get("wait_on_cuda_event_record_corr_id"))
            if key in seen_sync:
                count(i, "duplicate")
                continue
            seen_sync.add(key)
            stream_wait_rows |= kind == "Stream Wait Event"
            syncs.append({"i": i, "corr": corr, "kind": kind, "args": args})
            fate.setdefault(i, "ok")
        elif cat in OPS or cat in ANNOTATIONS:
            if pid is None or tid is None:
                count(i, "missing-field")
                continue
            rf = integer(args.get("Record function id"))
            if rf is None:
                rf = integer(args.get("External id"))
            key = (pid, tid, ts, dur, name, rf if cat in OPS else None, cat in OPS)
            if key in seen_range:
                count(i, "duplicate")
                continue
            seen_range.add(key)
            r = {"i": i, "name": name, "ts": ts, "end": ts + dur, "pid": pid, "tid": tid,
                 "rf": rf}
            (ops if cat in OPS else annotations).append(r)
            fate.setdefault(i, "ok")
        else:
            fate.setdefault(i, "ok")

    # GPU work and its calls (by correlation, or by the flow that ends on it)
    flow_end = {}
    for e in evs:
        if isinstance(e, dict) and e.get("cat") in FLOWS and e.get("ph") == "f":
            flow_end[(e.get("pid"), e.get("tid"), e.get("ts"))] = e.get("id")
    matched = set()
    for g in gpus:
        c = g["corr"] if g["corr"] is not None else flow_end.get((g["pid"], g["tid"], g["ts"]))
        g["call"] = calls.get(c) if valid(c) else None
        if g["call"] is None:
            count(g["i"], "unmatched-correlation")
        else:
            matched.add(c)
    for c, call in calls.items():
        if valid(c) and LAUNCH.match(call["name"]) and "HostFunc" not in call["name"] and \
                c not in matched and c not in work_seen:
            count(call["i"], "launch-without-work")

    # NCCL kernels: a collective when its kind and size are known
    group = max([integer(g["args"].get("Group size")) or 0 for g in gpus] + [0])
    if world is None or world < 0:
        world = default_group(dist) or (group if group >= 2 else None)
    for g in gpus:
        if g["kind"] != "kernel" or not re.match(r"^nccl(Dev)?Kernel_", g["name"]):
            continue
        kind = nccl_kind(g["args"].get("Collective name"), False) or nccl_kind(g["name"], True)
        if kind is None and g["call"] is not None:
            call = g["call"]
            for r in reversed(sorted(ops + annotations, key=lambda r: r["ts"])):
                if r["pid"] == call["pid"] and r["tid"] == call["tid"] and \
                        r["ts"] <= call["ts"] <= r["end"] and r["name"].startswith("nccl:"):
                    kind = nccl_kind(r["name"], False)
                    break
        size = integer(g["args"].get("Group size")) or world
        if kind is None or not size:
            count(g["i"], "nccl-unmatched")

    # sync rows and sync calls without rows
    with_row = set()
    for s in syncs:
        call = calls.get(s["corr"]) if valid(s["corr"]) else None
        if call is None:
            count(s["i"], "sync-without-call")
            continue
        with_row.add(s["corr"])
        role = role_of(call["name"]) or {"Event Sync": "event-sync",
                                         "Stream Wait Event": "stream-wait",
                                         "Stream Sync": "stream-sync",
                                         "Context Sync": "device-sync"}.get(s["kind"])
        a = s["args"]
        if role == "stream-sync" and not (valid(integer(a.get("stream"))) and
                                          valid(integer(a.get("device")))):
            count(s["i"], "widened-sync")
        elif role in ("stream-wait", "event-sync"):
            if role == "stream-wait" and not (valid(integer(a.get("stream"))) and
                                              valid(integer(a.get("device")))):
                count(s["i"], "unbound-wait")
                continue
            rs = integer(a.get("wait_on_stream"))
            rc = integer(a.get("wait_on_cuda_event_record_corr_id"))
            ev = integer(a.get("wait_on_cuda_event_id"))
            if not valid(ev) and not valid(rc) and not valid(rs):
                count(s["i"], "unbound-wait")
            elif valid(rs) and not (valid(rc) and rc in calls):
                first = min([c for c in calls if valid(c)], default=None)
                before = valid(rc) and first is not None and rc < first and rc < s["corr"]
                if not before:
                    count(s["i"], "assumed-record")
    for c, call in calls.items():
        if c in with_row:
            continue
        role = role_of(call["name"])
        if role == "stream-sync":
            count(call["i"], "widened-sync")
        elif role == "stream-wait":
            count(call["i"], "idle-stream-wait" if stream_wait_rows else "unbound-wait")
        elif role == "event-sync":
            count(call["i"], "unbound-wait")

    # the execution trace: its nodes are events too
    host_ops = False
    if et_path:
        et = load_json(et_path)
        nodes = et.get("nodes", [])
        read += len(nodes)
        op_names = {}
        for r in ops:
            op_names.setdefault(r["rf"], set()).add(r["name"])
        launches = [(c["pid"], c["tid"], c["ts"]) for c in calls.values()
                    if any(g["call"] is c for g in gpus)]
        joined, seen_rf = {}, set()
        for n in nodes:
            if not isinstance(n, dict):
                counted["bad-type"] += 1
                continue
            if getattr(n, "dup", False):
                counted["duplicate-key"] += 1
                continue
            rf = integer(attr(n, "rf_id"))
            if rf is None or rf < 0:
                ignored += 1
                continue
            tensors, bad = node_tensors(n)
            if rf in seen_rf:
                if tensors:
                    counted["duplicate"] += 1
                else:
                    ignored += 1
                continue
            seen_rf.add(rf)
            name = n.get("name", "")
            if rf in op_names and name in op_names[rf]:
                joined[rf] = tensors
            if bad:
                counted[bad] += 1
            elif not tensors:
                ignored += 1
            elif rf not in joined:
                counted["unjoined-et-op"] += 1
        for r in ops:
            if r["rf"] is not None and r["rf"] not in joined and \
                    not r["name"].startswith("ProfilerStep#") and fate.get(r["i"]) == "ok":
                count(r["i"], "unjoined-op")
        for r in ops:
            if r["rf"] in joined and any(t[5] < 0 for t in joined[r["rf"]]) and not any(
                    p == r["pid"] and t == r["tid"] and r["ts"] <= ts <= r["end"]
                    for p, t, ts in launches):
                host_ops = True

    # async copies in a capture without any host access
    if not host_ops:
        for g in gpus:
            if g["kind"] != "memcpy" or g["call"] is None or fate.get(g["i"]) != "ok":
                continue
            n = g["name"]
            host_side = any(w in n for w in ("HtoD", "DtoH", "HtoH", "HostToDevice",
                                              "DeviceToHost", "HostToHost", "Pinned",
                                              "Pageable"))
            blocks = "Async" not in g["call"]["name"] or "Pageable" in n
            if host_side and not blocks:
                count(g["i"], "host-unrecorded")
    return {"read": read, "ignored": ignored, "counted": dict(counted)}


def attr(node, key):
    if key in node:
        return node[key]
    for a in node.get("attrs", []) if isinstance(node.get("attrs"), list) else []:
        if isinstance(a, dict) and a.get("name") == key:
            return a.get("value")
    return None


def node_tensors(node):
    """The tensors of an ET node ([id, storage, offset, numel, itemsize,
    device] with device cuda/cpu) as (storage, offset, numel, itemsize,
    device index: -1 for the host); and the reason a malformed one is
    counted (or None). An aten::empty* allocates: no tensor."""
    if str(node.get("name", "")).startswith("aten::empty"):
        return [], None
    out, bad = [], None

    def values(key):
        v = node.get(key)
        if isinstance(v, dict):
            v = v.get("values")
        return v if isinstance(v, list) else []

    def one(t):
        nonlocal bad
        if not (isinstance(t, list) and len(t) == 6 and isinstance(t[5], str)):
            return
        if not t[5].startswith("cuda") and t[5] != "cpu":
            return
        if not all(is_int(x) for x in t[:5]):
            bad = bad or "bad-type"
            return
        if t[2] < 0 or t[3] < 0 or t[4] < 0:
            bad = bad or "bad-number"
            return
        if t[1] < 0 or t[3] == 0 or t[4] == 0:
            return
        dev = -1 if t[5] == "cpu" else int(t[5][5:] or 0) if t[5].startswith("cuda:") else 0
        out.append((t[1], t[2], t[3], t[4], t[0], dev))

    for key in ("inputs", "outputs"):
        for v in values(key):
            if isinstance(v, list) and v and all(isinstance(x, list) for x in v):
                for x in v:
                    one(x)
            else:
                one(v)
    return out, bad


def default_group(dist):
    pg = dist.get("pg_config") if isinstance(dist, dict) else None
    groups = pg if isinstance(pg, list) else list(pg.values()) if isinstance(pg, dict) else []
    for g in groups:
        if isinstance(g, dict) and (g.get("pg_name") == "0" or g.get("pg_desc") == "default_pg"):
            size = integer(g.get("pg_size"))
            return size or (len(g["ranks"]) if isinstance(g.get("ranks"), list) else None)
    return None


def nccl_kind(name, kernel):
    if not isinstance(name, str):
        return None
    for p in ("ncclKernel_", "ncclDevKernel_", "nccl:"):
        if name.startswith(p):
            name = name[len(p):]
            break
    word = ""
    for ch in name:
        if ch == "_":
            if kernel and word:
                break
            continue
        word += ch.lower()
    for k in ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce",
              "barrier"):
        if word.startswith(k):
            return k
    return None


def role_of(name):
    b = base_name(name)
    if b in STREAM_SYNC:
        return "stream-sync"
    if b in EVENT_SYNC:
        return "event-sync"
    if b in STREAM_WAIT:
        return "stream-wait"
    if b in ("cudaDeviceSynchronize", "cudaThreadSynchronize", "cuCtxSynchronize",
             "hipDeviceSynchronize"):
        return "device-sync"
    if b in ("cudaEventQuery", "cuEventQuery", "hipEventQuery", "cudaStreamQuery",
             "cuStreamQuery", "hipStreamQuery"):
        return "query"
    return None


# ---------------------------------------------------------------------------
# Nsight Systems.

def nsys(path):
    db = sqlite3.connect("file:%s?mode=ro&immutable=1" % path, uri=True)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    strings = dict(db.execute("SELECT id, value FROM StringIds"))
    read, counted = 0, Counter()
    cols = {r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")}
    calls, seen = {}, set()
    q = "SELECT start, end, globalTid, correlationId, nameId%s FROM CUPTI_ACTIVITY_KIND_RUNTIME" % (
        ", name" if "name" in cols else ", NULL")
    for start, end, gtid, corr, name_id, name in db.execute(q):
        read += 1
        n = strings.get(name_id) or (name if isinstance(name, str) else "")
        if not n:
            counted["missing-field"] += 1
            continue
        pid = (gtid >> 24) & 0xFFFFFF
        key = (pid, corr)
        if key in seen:
            c = calls[key]
            if (start, end, n) == (c["start"], c["end"], c["name"]):
                counted["duplicate"] += 1
            continue
        seen.add(key)
        calls[key] = {"start": start, "end": end, "name": base_name(n), "counted": False}
    only = {p for p, _ in calls}
    work = set()
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET"):
        if t not in tables:
            continue
        tcols = {r[1] for r in db.execute("PRAGMA table_info(%s)" % t)}
        gp = "globalPid" if "globalPid" in tcols else "NULL"
        for corr, gpid in db.execute("SELECT correlationId, %s FROM %s" % (gp, t)):
            read += 1
            pid = (gpid >> 24) & 0xFFFFFF if gpid is not None else (
                next(iter(only)) if len(only) == 1 else 0)
            work.add((pid, corr))
            if (pid, corr) not in calls:
                counted["unmatched-correlation"] += 1
    with_row = set()
    if "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" in tables:
        scols = {r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)")}
        gp = "globalPid" if "globalPid" in scols else "NULL"
        for corr, gpid, stream in db.execute(
                "SELECT correlationId, %s, streamId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" % gp):
            read += 1
            pid = (gpid >> 24) & 0xFFFFFF if gpid is not None else (
                next(iter(only)) if len(only) == 1 else 0)
            c = calls.get((pid, corr))
            if c is None:
                counted["sync-without-call"] += 1
                continue
            with_row.add((pid, corr))
            if role_of(c["name"]) == "stream-sync" and not valid(stream):
                counted["widened-sync"] += 1
    for t in ("CUPTI_ACTIVITY_KIND_CUDA_EVENT", "TARGET_INFO_CUDA_STREAM",
              "TARGET_INFO_CUDA_NULL_STREAM"):
        if t in tables:
            read += db.execute("SELECT count(*) FROM %s" % t).fetchone()[0]
    if "NVTX_EVENTS" in tables:
        for (end,) in db.execute("SELECT end FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71)"):
            read += 1
            if end is None:
                counted["no-dur"] += 1
    for key, c in calls.items():
        if LAUNCH.match(c["name"]) and "HostFunc" not in c["name"] and key not in work:
            counted["launch-without-work"] += 1
        elif key not in with_row and role_of(c["name"]) == "stream-sync":
            counted["widened-sync"] += 1
        elif key not in with_row and role_of(c["name"]) in ("stream-wait", "event-sync"):
            counted["unbound-wait"] += 1
    return {"read": read, "ignored": 0, "counted": dict(counted)}


def count(path, et):
    with open(path, "rb") as f:
        head = f.read(16)
    if head.startswith(b"SQLite format 3"):
        return nsys(path)
    return kineto(path, et)


def main(argv):
    if len(argv) == 3 and argv[1] == "--list":
        with open(argv[2], encoding="utf-8") as f:
            for line in f:
                path, et = line.split()
                print(json.dumps(count(path, None if et == "-" else et), sort_keys=True))
        return 0
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--et"):
        sys.stderr.write(__doc__)
        return 2
    print(json.dumps(count(argv[1], argv[3] if len(argv) == 4 else None), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
