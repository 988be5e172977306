# corpus.py -- what the PyTorch corpus programs share (tests/pytorch): the
# GPU check (exit 77, one line, when there is none) and the NVTX mark that
# tells `syncsim capture` about a host access ("syncsim:r PTR SIZE LABEL";
# CUPTI cannot see the host's loads and stores).
import sys

import torch

N = 1 << 20          # elements: 4 MiB of float32, a block of the large pool


def need_gpu():
    if not torch.cuda.is_available():
        print("no CUDA device: torch.cuda.is_available() is False")
        sys.exit(77)


def host_access(mode, t, label):
    torch.cuda.nvtx.mark("syncsim:%s %x %d %s" % (mode, t.data_ptr(),
                                                 t.numel() * t.element_size(), label))
