"""A whole training step captured with torch.cuda.graph and replayed per batch, as PyTorch's documentation writes
it (tests/simtorch/simtorch_check.py graphs): warm-up on a side stream, capture, then per batch the inputs copied
into the static tensors and one replay.  The check finds the lines below by the comments that end them."""
import torch
from torch import nn

torch.manual_seed(0)
device = "cuda"
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = nn.MSELoss()
batches = [(torch.randn(32, 64).pin_memory(), torch.randn(32, 10).pin_memory()) for _ in range(8)]
static_x = torch.zeros(32, 64, device=device)
static_y = torch.zeros(32, 10, device=device)

# Warm-up on a side stream, as capture requires (the optimizer's state is made here).
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        loss_fn(model(static_x), static_y).backward()  # GRAPH:warmup
        opt.step()
torch.cuda.current_stream().wait_stream(side)

graph = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(graph):  # GRAPH:capture
    static_loss = loss_fn(model(static_x), static_y)
    static_loss.backward()
    opt.step()

for x, y in batches:
    static_x.copy_(x, non_blocking=True)
    static_y.copy_(y, non_blocking=True)
    graph.replay()  # GRAPH:replay
print("graph loss %.3f" % static_loss.item())
