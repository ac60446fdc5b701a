"""The plainest training loop, in a function: set-up (model, optimizer, data on the device, one forward as a
warm-up) before it, 20 iterations of zero_grad / forward through model and loss module on one line / backward /
step, then an evaluation with .item() after it.  Every iteration is one step; nothing before or after the loop
is."""
import torch
from torch import nn

ITERATIONS = 20


def main():
    torch.manual_seed(0)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(64, 256, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    with torch.no_grad():
        model(x)
    for i in range(ITERATIONS):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    with torch.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    print(f"loss {loss.item():.4f} accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
