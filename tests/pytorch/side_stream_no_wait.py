# A side stream reads a tensor that the default stream writes, without
# wait_stream: the side kernel may run before the producer. Race.
# expect race
# require streams=2 overlap
import torch
from corpus import N, need_gpu

need_gpu()
x = torch.randn(N, device="cuda")
y = x * 2                               # default stream writes y
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    z = y + 1                           # s reads y: nothing orders it after the write
torch.cuda.synchronize()
print(z[0].item())
