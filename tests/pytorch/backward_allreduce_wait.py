# Twin of backward_allreduce_no_wait: the communication stream waits for
# the default stream (wait_stream) before the all-reduce. Clean.
# expect clean
# require collective
import sys

import torch
import torch.distributed as dist
from corpus import N, need_gpu

need_gpu()
if not dist.is_available() or not dist.is_nccl_available():
    print("no NCCL in this PyTorch: torch.distributed.is_nccl_available() is False")
    sys.exit(77)
torch.cuda.set_device(0)
dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
w = torch.randn(N, device="cuda", requires_grad=True)
x = torch.randn(N, device="cuda")
(w * x).sum().backward()                # the default stream writes w.grad
comm = torch.cuda.Stream()
comm.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(comm):
    dist.all_reduce(w.grad)             # after the backward
torch.cuda.synchronize()
print(w.grad[0].item())
dist.destroy_process_group()
