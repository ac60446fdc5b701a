# A loop that skips the optimizer step when a batch's loss overflowed, as users write around fp16 training
# (`if not torch.isfinite(loss): continue`).  simgpu's kernels compute no values, so the overflow is planted on
# the host (the batches in OVERFLOW) rather than read from the loss: the trace is the same, forward and backward
# in every iteration, optimizer.step() in 8 of 12.  Every iteration is a training step all the same.
import torch
import torch.nn as nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
OVERFLOW = {0, 1, 2, 6}


def train(steps=12):
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(2)
    skipped = 0
    for i in range(steps):
        x = torch.randn(128, 64, generator=g).to(dev)
        y = torch.randint(0, 8, (128,), generator=g).to(dev)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if i in OVERFLOW:  # the loss was not finite: no update from this batch
            skipped += 1
            continue
        opt.step()
    print(f"{steps} iterations, {skipped} skipped")


if __name__ == "__main__":
    train()
