"""A training loop of 3 iterations (the fewest that are a loop), over a DataLoader, in a function; the model's
output and the loss computed on two lines, the optimizer Adam."""
import torch
from torch import nn

BATCHES = 3


def train():
    torch.manual_seed(0)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    data = torch.utils.data.TensorDataset(torch.randn(32 * BATCHES, 64), torch.randn(32 * BATCHES, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=32)
    model = nn.Sequential(nn.Linear(64, 128), nn.Tanh(), nn.Linear(128, 1)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()
    for xb, yb in loader:
        xb, yb = xb.to(dev), yb.to(dev)
        out = model(xb)
        loss = criterion(out, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


if __name__ == "__main__":
    print(f"loss {train():.4f}")
