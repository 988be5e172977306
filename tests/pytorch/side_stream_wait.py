# Twin of side_stream_no_wait: the side stream waits for the default stream
# (wait_stream) before it reads. Clean.
# expect clean
# require streams=2 overlap
import torch
from corpus import N, need_gpu

need_gpu()
x = torch.randn(N, device="cuda")
y = x * 2                               # default stream writes y
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    z = y + 1                           # s reads y after the write
torch.cuda.synchronize()
print(z[0].item())
