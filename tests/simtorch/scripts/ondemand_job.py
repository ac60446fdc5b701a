"""A long-running training job for tests/simtorch/ondemand_check.py: marks its steps as the runner does
(ITER_BEGIN / ITER_END through tbprof_marker when libtbprof is loaded), prints "ready" once warm, and runs
until the file argv[1] exists (at least 30 steps, at most 50 s), then prints "done" and exits 3 (a status
of its own, which the launcher must pass on).  With argv[2] == "nomarks" it marks nothing (a loop of its own,
whose steps tbprof capture --steps counts by its backward() calls)."""
import ctypes
import os
import sys
import time

import torch
from torch import nn

stop = sys.argv[1]
try:
    _marker = ctypes.CDLL(None).tbprof_marker
    _marker.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_char_p)
except AttributeError:
    _marker = None


if len(sys.argv) > 2 and sys.argv[2] == "nomarks":
    _marker = None


def mark(kind, value):
    if _marker:
        _marker(kind, value, b"step")


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to("cuda")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256, device="cuda")
y = torch.randint(0, 10, (64,), device="cuda")
loss_fn = nn.CrossEntropyLoss()
print("ready", flush=True)
step = 0
t0 = time.monotonic()
while (not os.path.exists(stop) or step < 30) and time.monotonic() - t0 < 50:
    mark(1, step)
    opt.zero_grad()
    loss = loss_fn(model(x), y)  # ONDEMAND:forward
    loss.backward()
    opt.step()
    mark(2, step)
    step += 1
print("done", flush=True)
sys.exit(3)
