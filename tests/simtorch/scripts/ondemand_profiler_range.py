"""cudaProfilerStart/Stop as a capture range (tests/simtorch/ondemand_check.py range): 20 marked steps,
torch.cuda.profiler.start() before step 5 and .stop() after step 14."""
import ctypes

import torch
from torch import nn

try:
    _marker = ctypes.CDLL(None).tbprof_marker
    _marker.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_char_p)
except AttributeError:
    _marker = None


def mark(kind, value):
    if _marker:
        _marker(kind, value, b"step")


model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to("cuda")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256, device="cuda")
y = torch.randint(0, 10, (64,), device="cuda")
loss_fn = nn.CrossEntropyLoss()
for step in range(20):
    if step == 5:
        torch.cuda.profiler.start()
    mark(1, step)
    opt.zero_grad()
    loss = loss_fn(model(x), y)  # RANGE:forward
    loss.backward()
    opt.step()
    mark(2, step)
    if step == 14:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
print("done")
