#!/usr/bin/env python3
"""The model run measured by tests/gpu: ResNet-18 training steps on an
NVIDIA GPU, identical in both runs the test compares.

    gpu_workload.py OUT.json [--torch-profiler TRACE.json] [--iters N]

Warm-up steps first (cuDNN/cuBLAS handles, allocator growth, lazy module
loading), then a synchronized window of N steps.  The window's
CLOCK_MONOTONIC bounds (time.monotonic_ns, the clock tbprof records in) go
to OUT.json.  With --torch-profiler the window runs inside torch.profiler
(CUDA activities) and its Chrome trace is exported.
"""
import argparse
import json
import time

import torch
import torchvision


def step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--torch-profiler")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    o = ap.parse_args()

    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    dev = torch.device("cuda")
    model = torchvision.models.resnet18(weights=None, num_classes=100).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(o.batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 100, (o.batch,), device=dev)

    for _ in range(o.warmup):
        step(model, opt, x, y)
    torch.cuda.synchronize()

    def window():
        begin = time.monotonic_ns()
        for _ in range(o.iters):
            step(model, opt, x, y)
        torch.cuda.synchronize()
        return begin, time.monotonic_ns()

    if o.torch_profiler:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            begin, end = window()
        prof.export_chrome_trace(o.torch_profiler)
    else:
        begin, end = window()
    with open(o.out, "w") as f:
        json.dump({"begin_ns": begin, "end_ns": end, "iters": o.iters,
                   "device": torch.cuda.get_device_name(0), "torch": torch.__version__}, f)


if __name__ == "__main__":
    main()
