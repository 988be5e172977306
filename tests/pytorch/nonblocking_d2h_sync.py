# Twin of nonblocking_d2h_no_sync: the host synchronises with the stream
# before it reads the copy's destination. Clean.
# expect clean
# require host-overlap
import torch
from corpus import N, host_access, need_gpu

need_gpu()
x = torch.randn(N, device="cuda")
h = torch.empty(N, pin_memory=True)
h.copy_(x, non_blocking=True)
torch.cuda.current_stream().synchronize()
host_access("r", h, "read h")
print(float(h[0]))
