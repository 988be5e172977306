# A non_blocking device-to-host copy into pinned memory, read on the host
# before anything waits for the copy (the read is made known with an NVTX
# mark: CUPTI cannot see host loads). Race.
# expect race type=RAW
# require host-overlap
import torch
from corpus import N, host_access, need_gpu

need_gpu()
x = torch.randn(N, device="cuda")
h = torch.empty(N, pin_memory=True)
h.copy_(x, non_blocking=True)           # the copy may still be writing h
host_access("r", h, "read h")
print(float(h[0]))
