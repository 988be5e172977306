# Twin of record_stream_missing: x.record_stream(s) makes the allocator
# record an event on s when x is freed and reuse the block only once that
# event completed (a query answered "complete": a synchronise). Clean.
# expect clean
# require streams=2 overlap
import torch
from corpus import N, need_gpu

need_gpu()
x = torch.randn(N, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    y = x * 3                           # s reads x's block
x.record_stream(s)
del x                                   # freed when s is done with it
z = torch.zeros(N, device="cuda")       # x's block only after s finished, or another
torch.cuda.synchronize()
print(y[0].item(), z[0].item())
