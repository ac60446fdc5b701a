"""The flight recorder's triggers (tests/simtorch/ondemand_check.py faults): a marked training loop that, by
argv[1], dies of SIGSEGV after step 40 ("crash"), takes 1 s more in step 40 and ends after step 60
("slow"), or hangs 4 s in step 40 and ends ("stall")."""
import ctypes
import sys
import time

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


mode = sys.argv[1]
model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to("cuda")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256, device="cuda")
y = torch.randint(0, 10, (64,), device="cuda")
loss_fn = nn.CrossEntropyLoss()
for step in range(61):
    mark(1, step)
    opt.zero_grad()
    loss = loss_fn(model(x), y)  # FAULTS:forward
    loss.backward()
    opt.step()
    if step == 40 and mode == "slow":
        time.sleep(1)
    if step == 40 and mode == "stall":
        time.sleep(4)  # FAULTS:hang
        break
    mark(2, step)
    if step == 40 and mode == "crash":
        print("crashing", flush=True)
        ctypes.string_at(0)  # FAULTS:crash
print("done")
