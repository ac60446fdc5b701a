# Each step calls a helper that loops over 30 scalar coefficients.
import torch
from torch import nn

COEFFS = [0.5 + 0.01 * k for k in range(30)]


def weighted_penalty(params, device):
    penalty = torch.zeros((), device=device)
    for k, c in enumerate(COEFFS):
        w = torch.tensor(c, device=device)  # a host-to-device copy per scalar
        penalty = penalty + w * params[k % len(params)].abs().mean()
    return penalty


def run(device, steps=5):
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 64, device=device)
    y = torch.randint(0, 10, (256,), device=device)
    params = list(model.parameters())
    for step in range(steps):
        out = model(x)
        loss = nn.functional.cross_entropy(out, y) + 1e-4 * weighted_penalty(params, device)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss


if __name__ == "__main__":
    torch.manual_seed(5)
    print(float(run("cuda" if torch.cuda.is_available() else "cpu")))
