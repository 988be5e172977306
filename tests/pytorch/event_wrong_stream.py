# The producer runs on s1, but the event is recorded on the default stream:
# s2 waits for the wrong work and reads y while s1 may still write it. Race.
# expect race type=RAW
# require streams=2 overlap
import torch
from corpus import N, need_gpu

need_gpu()
x = torch.randn(N, device="cuda")
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
s1.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s1):
    y = x * 2                           # s1 writes y
e = torch.cuda.Event()
e.record()                              # wrong stream: the current (default) one
s2.wait_event(e)
with torch.cuda.stream(s2):
    z = y + 1                           # s2 reads y
torch.cuda.synchronize()
print(z[0].item())
