# Mixed precision with torch.amp: autocast and a GradScaler.  Some batches carry an overflow (a planted inf in
# the inputs, as a loss scale too high for fp16 gives), so the scaler skips their optimizer step: on the CPU, whose
# kernels compute, in iterations 0, 1, 2 and 6.  Every iteration is a training step all the same.
import torch
import torch.nn as nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
amp_dtype = torch.float16 if dev == "cuda" else torch.bfloat16
OVERFLOW = {0, 1, 2, 6}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8))

    def forward(self, x):
        return self.net(x)


def batches(n):
    g = torch.Generator().manual_seed(1)
    for i in range(n):
        x = torch.randn(128, 64, generator=g)
        if i in OVERFLOW:
            x[0, 0] = float("inf")
        yield x, torch.randint(0, 8, (128,), generator=g)


def train(steps=10):
    model = MLP().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler(dev)
    skipped = 0
    for x, y in batches(steps):
        x, y = x.to(dev), y.to(dev)
        with torch.autocast(dev, dtype=amp_dtype):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scale = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        skipped += scaler.get_scale() < scale
    print(f"{steps} iterations, optimizer step skipped in {skipped}")


if __name__ == "__main__":
    train()
