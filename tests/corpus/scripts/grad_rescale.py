"""A small residual MLP trained with per-parameter gradient rescaling (an "adaptive clipping" written by hand):
each gradient is scaled by min(1, clip * ||w|| / ||g||), parameter by parameter, in Python."""
import torch
from torch import nn
import torch.nn.functional as F

STEPS = 8
CLIP = 0.02


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self, width=128, depth=6, classes=10):
        super().__init__()
        self.stem = nn.Linear(32, width)
        self.blocks = nn.Sequential(*[Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


@torch.no_grad()
def adaptive_clip_(parameters, clip=CLIP, eps=1e-3):
    for p in parameters:
        if p.grad is None:
            continue
        w_norm = torch.norm(p.detach()).clamp(min=eps)
        g_norm = torch.norm(p.grad)
        inv = 1.0 / (g_norm + 1e-6)
        scale = (clip * w_norm * inv).clamp(max=1.0)
        p.grad.mul_(scale)


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = torch.randn(STEPS, 256, 32)
    labels = torch.randint(0, 10, (STEPS, 256))
    for step in range(STEPS):
        x, y = data[step].to(device), labels[step].to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        adaptive_clip_(model.parameters())
        opt.step()
    print("final loss", loss.item())


if __name__ == "__main__":
    main()
