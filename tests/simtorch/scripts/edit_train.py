"""A small training loop for the diff across an edit (tests/simtorch/diff_edit_check.py): the check runs it, then a
copy with the lines marked EDIT:delete removed (four lines above loss.backward(), moving it and every line below),
and with the line marked EDIT:change calling another op; `tbanalyze diff` of the two must match every line the edit
only moved, and show the changed line as changed."""
import torch
from torch import nn
import torch.nn.functional as F


def make_model(device):
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)


def train_step(model, opt, x, y):
    opt.zero_grad()
    out = model(x)
    loss = F.cross_entropy(out, y)
    # The lines below are deleted in the edited copy (EDIT:delete marks them).
    scale = 1.0  # EDIT:delete
    scale = scale * 1.0  # EDIT:delete
    assert scale == 1.0  # EDIT:delete
    del scale  # EDIT:delete
    loss.backward()
    opt.step()
    h = torch.tanh(out.detach())  # EDIT:change
    return loss, h


def main():
    torch.manual_seed(0)
    device = "cuda"
    model = make_model(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64, device=device)
    y = torch.randint(0, 10, (32,), device=device)
    total = 0.0
    for step in range(8):
        loss, h = train_step(model, opt, x, y)
        total += loss.item()
        acc = (h.argmax(1) == y).float().mean()
    print("loss %.3f acc %.3f" % (total / 8, acc.item()))


if __name__ == "__main__":
    main()
