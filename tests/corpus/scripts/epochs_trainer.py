# A small trainer class: epochs of mini-batches, gradients cleared by hand.
import torch
import torch.nn as nn


class Deep(nn.Module):
    def __init__(self, depth=10, width=64):
        super().__init__()
        self.inp = nn.Linear(16, width)
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        for blk in self.blocks:
            h = torch.relu(blk(h)) + h
        return self.out(h)


class Trainer:
    def __init__(self, model, lr, device):
        self.model = model.to(device)
        self.device = device
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr)

    def clear_grads(self):
        for p in self.model.parameters():
            if p.grad is not None:
                p.grad.zero_()  # one tiny kernel per parameter

    def run_epoch(self, batches):
        total = 0.0
        for x, y in batches:
            x, y = x.to(self.device), y.to(self.device)
            loss = nn.functional.l1_loss(self.model(x), y)
            self.clear_grads()
            loss.backward()
            self.opt.step()
            total += float(loss.detach().cpu())
        return total / len(batches)

    def fit(self, batches, epochs):
        for epoch in range(epochs):
            avg = self.run_epoch(batches)
            print(f"epoch {epoch}: {avg:.3f}")


if __name__ == "__main__":
    torch.manual_seed(3)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    data = [(torch.randn(64, 16), torch.randn(64, 1)) for _ in range(4)]
    Trainer(Deep(), 1e-3, dev).fit(data, epochs=3)
