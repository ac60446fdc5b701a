# A custom autograd Function whose backward does some of its work in Python.
import time

import torch


class ClampGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, limit):
        ctx.limit = limit
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        out = torch.empty_like(grad)
        for lo in range(0, grad.shape[1], 8):  # clamped a slice of features at a time
            out[:, lo:lo + 8] = grad[:, lo:lo + 8].clamp(-ctx.limit, ctx.limit)
            if lo == grad.shape[1] // 2:
                time.sleep(0.003)  # bookkeeping on the host halfway (slow, and the GPU waits)
        return out, None


class Net(torch.nn.Module):
    """Elementwise layers: a scale and a shift per feature."""

    def __init__(self, width=128, depth=4):
        super().__init__()
        self.scale = torch.nn.ParameterList(torch.nn.Parameter(torch.ones(width)) for _ in range(depth))
        self.shift = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(width)) for _ in range(depth))

    def forward(self, x):
        for scale, shift in zip(self.scale, self.shift):
            x = ClampGrad.apply(torch.tanh(x * scale + shift), 0.5)
        return x


dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(9)
net = Net().to(dev)
opt = torch.optim.SGD(net.parameters(), lr=1e-2)
x = torch.randn(64, 128, device=dev)
for _ in range(6):
    out = net(x)
    loss = out.square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(float(loss))
