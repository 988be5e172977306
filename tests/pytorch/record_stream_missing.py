# A tensor used on a side stream is freed without record_stream: its block
# goes back to the default stream's pool at once, the next allocation of
# that size on the default stream gets it, and the default stream writes it
# while the side stream may still be reading it. Race.
# expect race
# require streams=2 overlap
import torch
from corpus import N, need_gpu

need_gpu()
x = torch.randn(N, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    y = x * 3                           # s reads x's block
del x                                   # the block is free for the default stream now
z = torch.zeros(N, device="cuda")       # reuses it: the default stream writes it
torch.cuda.synchronize()
print(y[0].item(), z[0].item())
