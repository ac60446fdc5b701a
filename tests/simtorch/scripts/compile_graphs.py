"""torch.compile(mode="reduce-overhead") (CUDA graph trees) on a tiny model (tests/simtorch/simtorch_check.py
graphs): inductor's Triton kernels captured into a CUDA graph and replayed per call.  The check finds the lines
below by the comments that end them."""
import torch
from torch import nn

torch.manual_seed(0)
device = "cuda"
model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 8)).to(device)
compiled = torch.compile(model, mode="reduce-overhead")
x = torch.randn(16, 32, device=device)
with torch.no_grad():
    for step in range(6):
        out = compiled(x)  # GRAPH:compiled_call
print("compiled out %.3f" % out.sum().item())
