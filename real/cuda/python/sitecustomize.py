"""syncsim capture: PyTorch's caching-allocator blocks into the event log.

`syncsim capture` puts this folder first on PYTHONPATH, so Python runs this
file at start-up (and then the sitecustomize it shadows, if any). It does
nothing unless SYNCSIM_CAPTURE_LOG names the log, and nothing before the
program imports torch. Then:

  - when CUDA is first initialised (torch.cuda._lazy_call: CUDA is not
    started earlier than the program starts it), it turns on the
    allocator's memory history (torch.cuda.memory._record_memory_history,
    Python frames only: the cheapest setting that still names the line);
  - at exit it reads the history (torch.cuda.memory._snapshot()["device_traces"])
    and appends one `block` record per entry to the log: action (alloc,
    free_requested, free_completed, segment_alloc, segment_free,
    segment_map, ...), address, size, stream, time (time_us, microseconds
    of the epoch) and the innermost Python frame outside torch (py=FILE:LINE).

traces/formats/cuda_log.c turns the blocks into the tensors a kernel
touches (docs/cuda.md, "PyTorch"). The history holds at most
SYNCSIM_TORCH_HISTORY entries (default 1,000,000; older ones are dropped by
PyTorch, and kernels launched before the oldest kept allocation fall back
to "pointer to the end of its segment"). Lines are written whole, many at a
time, with one write(2) each on an O_APPEND descriptor, so they never
interleave with the injection library's.
"""

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_LOG = os.environ.get("SYNCSIM_CAPTURE_LOG")
_HERE = os.path.dirname(os.path.abspath(__file__))
_LIBRARY_PARTS = ("/torch/", "/site-packages/", "/dist-packages/", "<")


def _user_frame(frames):
    """FILE:LINE of the innermost frame outside torch and installed
    packages (else the innermost), blanks made underscores; None without
    frames."""
    chosen = None
    for f in frames:
        name = f.get("filename") or ""
        here = "%s:%s" % (name, f.get("line", 0))
        if chosen is None:
            chosen = here
        if name and not any(p in name for p in _LIBRARY_PARTS):
            chosen = here
            break
    return chosen.replace(" ", "_").replace("\n", "_") if chosen else None


def _dump(torch):
    """Appends the allocator's history to the log as block records."""
    try:
        snap = torch.cuda.memory._snapshot()
    except Exception as e:  # CUDA never initialised, or torch shutting down
        _note("no allocator history: %s" % e)
        return
    pid = os.getpid()
    lines, untimed = [], 0
    for dev, trace in enumerate(snap.get("device_traces") or []):
        for e in trace:
            us = e.get("time_us")
            addr = e.get("addr")
            if us is None or addr is None:
                untimed += 1
                continue
            py = _user_frame(e.get("frames") or [])
            lines.append("block pid=%d dev=%d stream=%d us=%d action=%s ptr=0x%x size=%d%s\n" % (
                pid, dev, int(e.get("stream") or 0), int(us), e.get("action", "other"), int(addr),
                int(e.get("size") or 0), " py=" + py if py else ""))
    if untimed:
        lines.append("# syncsim: %d allocator history entries without time_us or addr: not used\n"
                     % untimed)
    _write(lines)


def _note(text):
    _write(["# syncsim: %s\n" % text.replace("\n", " ")])


def _write(lines):
    fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        chunk, size = [], 0
        for line in lines + [None]:
            if line is None or size + len(line) > 1 << 16:
                if chunk:
                    os.write(fd, "".join(chunk).encode("utf-8", "replace"))
                chunk, size = [], 0
            if line is not None:
                chunk.append(line)
                size += len(line)
    finally:
        os.close(fd)


def _torch_loaded(torch):
    """Called once torch is imported: history from CUDA's first use on,
    dumped at exit."""
    entries = int(os.environ.get("SYNCSIM_TORCH_HISTORY", "1000000"))

    def enable():
        try:
            torch.cuda.memory._record_memory_history(
                enabled="all", context="all", stacks="python", max_entries=entries)
        except Exception as e:
            _note("cannot record the allocator's history: %s" % e)

    try:
        torch.cuda._lazy_call(enable)
    except Exception as e:
        _note("cannot hook CUDA's initialisation: %s" % e)
        return
    atexit.register(_dump, torch)


class _TorchWatch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when torch is imported, wraps its loader so
    that _torch_loaded runs after the module is executed."""

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            try:
                _torch_loaded(module)
            except Exception as e:  # never break the program's import
                _note("torch hook failed: %s" % e)

        spec.loader.exec_module = exec_module
        return spec


def _chain():
    """Runs the sitecustomize this file shadows (a distribution's or the
    user's), as Python would have."""
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if _LOG:
    if "torch" in sys.modules:
        _torch_loaded(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchWatch())
_chain()
