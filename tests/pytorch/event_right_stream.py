# Twin of event_wrong_stream: the event is recorded on s1, after the
# producer, so s2 reads y after it was written. Clean.
# expect clean
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
e.record(s1)                            # after the producer
s2.wait_event(e)
with torch.cuda.stream(s2):
    z = y + 1                           # s2 reads y
torch.cuda.synchronize()
print(z[0].item())
