"""A small training loop for the join check (tests/simtorch/simtorch_check.py join): GEMMs forward and backward
(cuBLAS and cuBLASLt on simgpu, launched as their statically linked runtime does, a split-K one with its memset),
elementwise kernels, memsets and copies.  The check finds the lines below by the comments that end them."""
import torch
from torch import nn

torch.manual_seed(0)
device = "cuda"
# The first layer's forward GEMM is split-K (K = 8192 dwarfs M and N): cuBLASLt zeroes its output with a
# memset of its static runtime, then a partial-sum GEMM and a reduction, as on an H100 (issue #24).
model = nn.Sequential(nn.Linear(8192, 64), nn.ReLU(), nn.Linear(64, 256), nn.ReLU(),
                      nn.Linear(256, 10, bias=False)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
x = torch.randn(128, 8192).to(device)
y = torch.randint(0, 10, (128,)).to(device)
for step in range(4):
    opt.zero_grad()
    out = model(x)  # JOIN:forward
    loss = loss_fn(out, y)
    loss.backward()  # JOIN:backward
    opt.step()
print("loss %.3f" % loss.item())
