# Each gradient rescaled to unit norm by hand before the optimizer step, parameter by parameter, with torch's
# everyday functions: torch.norm (a Python function in torch/functional.py), a reciprocal written `1.0 / n`
# (Tensor.__rdiv__, Python in torch/_tensor.py), torch.clamp and an in-place multiply: a few tiny kernels per
# parameter, the GPU idle between them.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Tower(nn.Module):
    def __init__(self, width=48, depth=16):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = F.silu(layer(x))
        return x


def normalize_gradients(model, max_scale=1.0):
    for p in model.parameters():
        norm = torch.norm(p.grad)
        scale = 1.0 / (norm + 1e-6)
        scale = torch.clamp(scale, max=max_scale)
        p.grad.mul_(scale)


def main():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = Tower().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    data = [(torch.randn(32, 48), torch.randn(32, 48)) for _ in range(3)]
    for it in range(9):
        x, y = (t.to(dev) for t in data[it % 3])
        loss = F.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        normalize_gradients(model)
        opt.step()
    print("done")


if __name__ == "__main__":
    main()
