# Twin of graph_replay_no_wait: the side stream waits for the default
# stream before the replay. Clean.
# expect clean
# require streams=2 graph-nodes overlap
import torch
from corpus import N, need_gpu

need_gpu()
static_in = torch.randn(N, device="cuda")
static_out = torch.empty_like(static_in)
warm = torch.cuda.Stream()
warm.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(warm):
    static_out.copy_(static_in * 2)     # warm-up before capture
torch.cuda.current_stream().wait_stream(warm)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_out.copy_(static_in * 2)
static_in.fill_(3.0)                    # the default stream writes the graph's input
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    g.replay()                          # after the fill
torch.cuda.synchronize()
print(static_out[0].item())
