"""NVTX ranges from PyTorch (tests/nvtx/nvtx_check.py): 20 training steps, each in a range "step" holding
"forward" and "backward" ranges, steps 5 to 14 inside a range "region", as Megatron-style code marks its
phases with torch.cuda.nvtx.  Runs on the CPU (no GPU: the ranges alone) or on simtorch ("cuda" argument).
No runner marks: the steps are the ranges'."""
import sys

import torch
from torch import nn

device = "cuda" if len(sys.argv) > 1 and sys.argv[1] == "cuda" else "cpu"
model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256, device=device)
y = torch.randint(0, 10, (64,), device=device)
loss_fn = nn.CrossEntropyLoss()
levels = []
for step in range(20):
    if step == 5:
        torch.cuda.nvtx.range_push("region")  # RANGE:region
    levels.append(torch.cuda.nvtx.range_push("step"))  # RANGE:step
    opt.zero_grad()
    torch.cuda.nvtx.range_push("forward")  # RANGE:forward
    loss = loss_fn(model(x), y)
    torch.cuda.nvtx.range_pop()
    with torch.cuda.nvtx.range("backward"):  # RANGE:backward
        loss.backward()
    opt.step()
    if device == "cuda":
        torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    if step == 14:
        torch.cuda.nvtx.range_pop()
print("done")
