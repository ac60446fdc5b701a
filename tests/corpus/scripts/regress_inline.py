# Fit a small MLP to a noisy sine, everything at module level.
import math
import time

import torch
from torch import nn

torch.manual_seed(0)
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")

xs = torch.linspace(-math.pi, math.pi, 4096).unsqueeze(1)
ys = torch.sin(xs) + 0.1 * torch.randn_like(xs)

net = nn.Sequential(nn.Linear(1, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 1)).to(dev)
opt = torch.optim.Adam(net.parameters(), lr=3e-3)


def jitter(xb):
    # augmentation done on the host, one sample at a time
    out = xb.clone()
    for i in range(out.shape[0]):
        out[i] += 0.01 * math.sin(i)
    time.sleep(0.004)
    return out


bs = 256
for it in range(10):
    lo = (it * bs) % xs.shape[0]
    xb = jitter(xs[lo:lo + bs]).to(dev)
    yb = ys[lo:lo + bs].to(dev)
    pred = net(xb)
    loss = nn.functional.mse_loss(pred, yb)
    opt.zero_grad()
    loss.backward()
    opt.step()

print(f"final loss {loss.item():.4f}")
