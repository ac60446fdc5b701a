"""Train with a validation pass every few steps (its own loop over batches)."""
import sys

import torch
import torch.nn as nn

EVAL_EVERY = 3


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def evaluate(model, val_batches, device):
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in val_batches:
            preds = model(images.to(device)).argmax(dim=1)
            correct += (preds == labels.to(device)).sum().item()  # a sync per batch
    model.train()
    return correct


def main(steps):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = ConvNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    train = [(torch.randn(32, 1, 16, 16), torch.randint(0, 10, (32,))) for _ in range(steps)]
    val = [(torch.randn(32, 1, 16, 16), torch.randint(0, 10, (32,))) for _ in range(4)]
    scores = []
    for step, (images, labels) in enumerate(train):
        loss = nn.functional.cross_entropy(model(images.to(device)), labels.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % EVAL_EVERY == EVAL_EVERY - 1:
            scores.append(evaluate(model, val, device))
    print("validation:", scores)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 12)
