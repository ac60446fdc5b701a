"""The plainest training loop at module level, as a first script is written: 20 iterations of zero_grad /
forward through model and loss module on one line / backward / step, the loss printed with .item() after."""
import torch
from torch import nn

ITERATIONS = 20

torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()
x = torch.randn(64, 256, device=dev)
y = torch.randint(0, 10, (64,), device=dev)
for i in range(ITERATIONS):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
