"""Train through a custom autograd.Function whose backward works in Python.

A small regression net whose middle layer is a torch.autograd.Function: its
forward is one tensor op, its backward recomputes a per-feature scale in plain
Python (the shape of reversible layers that recompute their forward inside
backward, as Reformer's) for --backward-ms milliseconds before returning the
gradient.  autograd runs that backward on its device thread while the main
thread waits in loss.backward().  Nothing in it knows about tbprof.
"""
import argparse
import time

import torch
import torch.nn as nn


class PythonScaledGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, busy_s):
        ctx.busy_s = busy_s
        return x * 2.0

    @staticmethod
    def backward(ctx, grad):
        deadline = time.perf_counter() + ctx.busy_s
        scale, n = 0.0, 0
        while time.perf_counter() < deadline:  # the Python work of this backward
            n += 1
            scale += 1.0 / (n * n)
        return grad * (2.0 * scale / max(scale, 1e-12)), None


class Net(nn.Module):
    def __init__(self, busy_s):
        super().__init__()
        self.inp = nn.Linear(64, 128)
        self.out = nn.Linear(128, 1)
        self.busy_s = busy_s

    def forward(self, x):
        return self.out(PythonScaledGrad.apply(torch.relu(self.inp(x)), self.busy_s))


def main():
    parser = argparse.ArgumentParser(description="custom autograd.Function with a Python backward")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--backward-ms", type=float, default=20.0)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = Net(args.backward_ms / 1000.0).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data, target = torch.randn(32, 64, device=device), torch.randn(32, 1, device=device)
    for step in range(args.steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(data), target)
        loss.backward()
        optimizer.step()
    print(f"final loss {loss.item():.4f} after {args.steps} steps on {device.type}")


if __name__ == "__main__":
    main()
