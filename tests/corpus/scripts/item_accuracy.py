# A small classifier trained on one batch; after each step the accuracy is counted one sample at a time, each
# comparison reading a GPU value with .item() (a sync per sample), as a first-time user writes it.
import torch
from torch import nn


def count_correct(logits, labels):
    correct = 0
    for i in range(logits.shape[0]):
        if logits[i].argmax().item() == labels[i].item():
            correct += 1
    return correct


def main(steps=12):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(16, 32, device=device)
    y = torch.randint(0, 10, (16,), device=device)
    seen = correct = 0
    for step in range(steps):
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        correct += count_correct(logits, y)
        seen += x.shape[0]
    print(f"accuracy {correct / seen:.3f}")


if __name__ == "__main__":
    main()
