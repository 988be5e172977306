"""corpus_check.py TRACE SOURCE -- whether a corpus program's trace shows
what its case is about (tests/cuda/run_case.sh, tests/pytorch/run_case.sh).

A finding can only be as good as what capture saw: a clean twin whose
kernels carry no accesses passes without its case being looked at, and a
race program can pass on an unrelated pair. So each corpus program states,
in `// require WORDS` (CUDA) or `# require WORDS` (Python) lines, what its
trace must hold; every word is checked on TRACE (the run exported by
`syncsim export`, the text format of docs/trace-format.md):

  streams=N     N stream queues each run a statement (kernel, copy, memset,
                collective) that accesses memory: the kernels on each
                stream the program names were seen with their pointers;
  overlap       statements on two queues, one of them a stream, access
                overlapping bytes of one buffer (views resolved to their
                root), one of them writing: the bytes the case is about,
                seen from both sides (what a missing wait races on and a
                present wait orders);
  host-overlap  a host statement (an NVTX mark's access) and a stream's
                overlap so, one of them writing;
  graph-nodes   graph replays were seen: the run has kernels of graph nodes
                (meta capture.graph_kernels) and every one of them accesses
                memory (capture.graph_kernels_accessing);
  collective    a collective (an NCCL call) accesses memory, and a statement
                on another stream writes bytes it accesses.

Prints one line per word (ok or FAILED and why) and exits 1 when any
failed, 2 on bad usage or an unreadable trace.
"""

import shlex
import sys

WORDS = ("streams", "overlap", "host-overlap", "graph-nodes", "collective")


class Trace:
    def __init__(self, path):
        self.queues = {}        # name -> "host" | "stream"
        self.buffers = {}       # name -> (root, offset, size)
        self.meta = {}
        self.stmts = []         # (index, queue, verb, [(root, lo, hi, mode)])
        with open(path, encoding="utf-8", errors="replace") as f:
            for no, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                try:
                    words = shlex.split(line)
                except ValueError as e:
                    raise SystemExit("corpus_check: %s:%d: %s" % (path, no, e))
                self.take(words)

    def take(self, w):
        if w[0] == "queue" and len(w) >= 3:
            self.queues[w[1]] = w[2]
        elif w[0] == "buffer" and len(w) >= 2:
            kv = dict(x.split("=", 1) for x in w[2:] if "=" in x)
            size = int(kv.get("size", "0"), 0)
            if "in" in kv:
                root, base, _ = self.buffers.get(kv["in"], (kv["in"], 0, 0))
                self.buffers[w[1]] = (root, base + int(kv.get("offset", "0"), 0), size)
            else:
                self.buffers[w[1]] = (w[1], 0, size)
        elif w[0] == "meta" and len(w) >= 2 and "=" in w[1]:
            k, v = w[1].split("=", 1)
            self.meta[k] = v
        elif w[0] in self.queues and len(w) >= 2:
            words = w[2:]
            if w[1] == "copy" and len(w) >= 5:     # copy LABEL SRC DST: op LABEL r:SRC w:DST
                words = ["r:" + w[3], "w:" + w[4]] + w[5:]
            acc = [a for a in (self.access(x) for x in words) if a]
            self.stmts.append((len(self.stmts), w[0], w[1], acc))

    def access(self, word):
        mode, sep, ref = word.partition(":")
        if not sep or mode not in ("r", "w", "rw"):
            return None
        name, br, rng = ref.partition("[")
        if name not in self.buffers:
            return None
        root, base, size = self.buffers[name]
        lo, hi = 0, size
        if br:
            a, _, b = rng.rstrip("]").partition(":")
            lo = int(a, 0)
            hi = int(b, 0) if b else size
        return (root, base + lo, base + hi, mode)

    def stream(self, q):
        return self.queues.get(q) == "stream"


def pairs(trace, want):
    """The first pair of accesses (statement, statement) on two queues that
    overlap in bytes, one of them writing, for which want(s1, s2) holds."""
    by_root = {}
    for s in trace.stmts:
        for (root, lo, hi, mode) in s[3]:
            if hi > lo:
                by_root.setdefault(root, []).append((lo, hi, "w" in mode, s))
    for accs in by_root.values():
        accs.sort(key=lambda a: a[0])
        active = []
        for a in accs:
            active = [b for b in active if b[1] > a[0]]
            for b in active:
                if (a[2] or b[2]) and a[3][1] != b[3][1] and want(a[3], b[3]):
                    return a[3], b[3]
            active.append(a)
    return None


def check(trace, word):
    """(ok, why) for one requirement word."""
    name, _, arg = word.partition("=")
    gpu = lambda s: trace.stream(s[1])
    if name == "streams":
        n = int(arg or "1")
        seen = sorted({s[1] for s in trace.stmts if gpu(s) and s[3]})
        return len(seen) >= n, "%d streams access memory (%s), %d wanted" % (
            len(seen), ", ".join(seen) or "none", n)
    if name == "overlap":
        p = pairs(trace, lambda a, b: gpu(a) or gpu(b))
        return p is not None, ("%s on %s and %s on %s touch the same bytes" % (
            p[0][2], p[0][1], p[1][2], p[1][1]) if p else
            "no two queues access overlapping bytes with a write")
    if name == "host-overlap":
        host = lambda s: trace.queues.get(s[1]) == "host"
        p = pairs(trace, lambda a, b: (host(a) and gpu(b)) or (gpu(a) and host(b)))
        if not p:
            return False, "no host access overlaps a stream's"
        h, g = (p[0], p[1]) if host(p[0]) else (p[1], p[0])
        return True, "a host access on %s overlaps %s on %s" % (h[1], g[2], g[1])
    if name == "graph-nodes":
        n = int(trace.meta.get("capture.graph_kernels", "0"))
        a = int(trace.meta.get("capture.graph_kernels_accessing", "0"))
        return n > 0 and a == n, "%d graph-node kernels, %d of them access memory" % (n, a)
    if name == "collective":
        colls = [s for s in trace.stmts if s[2] == "collective"]
        with_acc = [s for s in colls if s[3]]
        if not with_acc:
            return False, "%d collectives, none accesses memory" % len(colls)
        p = pairs(trace, lambda a, b: (a[2] == "collective") != (b[2] == "collective")
                  and gpu(a) and gpu(b))
        if not p:
            return False, "no statement on another stream writes what the collective accesses"
        c, o = (p[0], p[1]) if p[0][2] == "collective" else (p[1], p[0])
        return True, "the collective on %s and %s on %s touch the same bytes" % (c[1], o[2], o[1])
    return False, "unknown requirement (expected %s)" % ", ".join(WORDS)


def requirements(source):
    want = []
    with open(source, encoding="utf-8", errors="replace") as f:
        for line in f:
            for mark in ("// require ", "# require "):
                if line.startswith(mark):
                    want += line[len(mark):].split()
    return want


def main(argv):
    if len(argv) != 3:
        print("usage: corpus_check.py TRACE SOURCE", file=sys.stderr)
        return 2
    try:
        trace = Trace(argv[1])
        want = requirements(argv[2])
    except OSError as e:
        print("corpus_check: %s" % e, file=sys.stderr)
        return 2
    if not want:
        print("corpus_check: %s states no `require` line: what its case is about is not checked"
              % argv[2])
        return 1
    ok = True
    for word in want:
        good, why = check(trace, word)
        print("corpus_check: require %s: %s (%s)" % (word, "ok" if good else "FAILED", why))
        ok &= good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
