"""Train a small image classifier: the shape of a typical PyTorch example script.

A convolutional net on a synthetic 10-class dataset (random 28x28 images), a
DataLoader, Adam, a learning-rate schedule, loss logged with .item() every few
batches, and an evaluation pass per epoch.  --lazy-setup-ms: on its first batch
the loop builds a lookup table in Python for that long (one-time work done
lazily, as a tokenizer cache or a warm-up).  Nothing in it knows about tbprof.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(32 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout(torch.flatten(x, 1))
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic_dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(n, 1, 28, 28, generator=g)
    labels = torch.randint(0, 10, (n,), generator=g)
    return TensorDataset(images, labels)


def build_lookup_table(ms):
    deadline = time.perf_counter() + ms / 1000.0
    table = []
    while time.perf_counter() < deadline:
        table.append(len(table) % 7)
    return table


def train(model, device, loader, optimizer, epoch, log_interval, lazy):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        if lazy["ms"] and lazy["table"] is None:
            lazy["table"] = build_lookup_table(lazy["ms"])
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(loader.dataset)}]\tLoss: {loss.item():.6f}")


def test(model, device, loader):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += output.argmax(dim=1).eq(target).sum().item()
    test_loss /= len(loader.dataset)
    print(f"Test set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(loader.dataset)}")


def main():
    parser = argparse.ArgumentParser(description="small classifier")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train-size", type=int, default=512)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--log-interval", type=int, default=4)
    parser.add_argument("--no-cuda", action="store_true")
    parser.add_argument("--lazy-setup-ms", type=float, default=0.0)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() and not args.no_cuda else "cpu")
    torch.manual_seed(1)
    train_loader = DataLoader(synthetic_dataset(args.train_size, 1), batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(synthetic_dataset(args.train_size // 4, 2), batch_size=256)
    model = Net().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    lazy = {"ms": args.lazy_setup_ms, "table": None}
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        train(model, device, train_loader, optimizer, epoch, args.log_interval, lazy)
        test(model, device, test_loader)
        scheduler.step()
    print(f"done in {time.perf_counter() - start:.2f} s on {device.type}")


if __name__ == "__main__":
    main()
