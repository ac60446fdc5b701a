"""A training loop with three kinds of host time the GPU waits for (simtorch_check.py gaps):
augment() computes on the CPU before it launches, torch.cuda.empty_cache() every step makes the
caching allocator go to the driver again, and the optimizer launches from the main thread after
backward() returns."""
import argparse

import torch
import torch.nn as nn


def augment(batch, n):
    s = 0
    for i in range(n):  # pure-Python work on the CPU, no GPU call
        s += i * i
    return batch.flip(-1)  # then a launch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--cpu-iters", type=int, default=60000)
    ap.add_argument("--no-empty-cache", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(2048, 1024, device="cuda")
    y = torch.randint(0, 10, (2048,), device="cuda")
    for _ in range(args.steps):
        xb = augment(x, args.cpu_iters)
        loss = nn.functional.cross_entropy(model(xb), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if not args.no_empty_cache:
            torch.cuda.empty_cache()  # the cache's blocks go back to the driver: the next step allocates again
    print("loss", loss.item())


if __name__ == "__main__":
    main()
