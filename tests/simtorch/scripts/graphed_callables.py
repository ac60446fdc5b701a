"""A model's forward and backward captured by torch.cuda.make_graphed_callables and called per batch, the optimizer
step eager (tests/simtorch/simtorch_check.py graphs).  The check finds the lines below by the comments that end
them."""
import torch
from torch import nn

torch.manual_seed(0)
device = "cuda"
model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.MSELoss()
batches = [(torch.randn(32, 64).to(device), torch.randn(32, 10).to(device)) for _ in range(8)]
sample = torch.zeros(32, 64, device=device, requires_grad=True)
graphed = torch.cuda.make_graphed_callables(model, (sample,))  # GRAPH:capture
for x, y in batches:
    opt.zero_grad(set_to_none=True)
    out = graphed(x)  # GRAPH:forward
    loss = loss_fn(out, y)
    loss.backward()  # GRAPH:backward
    opt.step()
print("graphed loss %.3f" % loss.item())
