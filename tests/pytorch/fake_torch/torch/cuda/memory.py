# torch.cuda.memory's history: recorded once _record_memory_history is
# called; the snapshot's device_traces are then the entries a program with
# one 1 MiB segment, blocks A and C, A freed and its bytes reused by B would
# give (times in microseconds of the epoch, as PyTorch's time_us).
import os

_on = False


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=0):
    global _on
    _on = enabled == "all" and stacks == "python" and max_entries > 0


def _frames(line):
    return [{"filename": "/opt/venv/lib/python3.12/site-packages/torch/_tensor.py", "line": 40,
             "name": "inner"},
            {"filename": "/work/my program.py", "line": line, "name": "main"}]


def _snapshot():
    if not _on:
        return {"segments": [], "device_traces": [[]]}
    t0 = int(os.environ.get("FAKE_TORCH_T0_US", "5000000"))
    e = lambda dt, action, addr, size, line: {  # noqa: E731
        "time_us": t0 + dt, "action": action, "addr": addr, "size": size, "stream": 0,
        "frames": _frames(line)}
    return {"segments": [], "device_traces": [[
        e(150, "segment_alloc", 0x10000, 1 << 20, 2),
        e(150, "alloc", 0x10000, 512, 3),
        e(160, "alloc", 0x10200, 512, 4),
        e(500, "free_requested", 0x10000, 512, 8),
        e(500, "free_completed", 0x10000, 512, 8),
        e(600, "alloc", 0x10000, 512, 9),
        {"action": "oom", "addr": 0, "size": 0, "stream": 0, "frames": []},
    ]]}
