# A stand-in for torch (tests/pytorch/test_sitecustomize.sh): only what
# real/cuda/python/sitecustomize.py calls, with a fixed allocator history.
from . import cuda  # noqa: F401
