# torch.cuda's lazy initialisation: calls queued until the program first
# uses CUDA (here: init()).
from . import memory  # noqa: F401

_queued = []
_initialized = False


def _lazy_call(fn):
    if _initialized:
        fn()
    else:
        _queued.append(fn)


def init():
    global _initialized
    _initialized = True
    for fn in _queued:
        fn()
