"""Regions from Python (tests/simtorch/ondemand_check.py region): 20 steps marked with tbprof.mark_step(), a
capture around steps 5..14 (tbprof.capture / .stop()), then tbprof.capture(steps=3) in the background, then
`with tbprof.capture(...)` around 4 steps.  argv[1]: the directory for the files; argv[2]: python/ of the
source tree."""
import sys

import torch
from torch import nn

sys.path.insert(0, sys.argv[2])
import tbprof  # noqa: E402

out = sys.argv[1]
model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to("cuda")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256, device="cuda")
y = torch.randint(0, 10, (64,), device="cuda")
loss_fn = nn.CrossEntropyLoss()


def train_step():
    opt.zero_grad()
    loss = loss_fn(model(x), y)  # REGION:forward
    loss.backward()
    opt.step()


region = None
for i in range(20):
    if i == 5:
        region = tbprof.capture(out + "/region.zst")
    tbprof.mark_step()
    train_step()
    if i == 14:
        print("region written:", region.stop() is not None)
background = tbprof.capture(out + "/steps.zst", steps=3)
for i in range(6):
    tbprof.mark_step()
    train_step()
print("steps written:", background.wait(20) is not None)
with tbprof.capture(out + "/with.zst"):
    for i in range(4):
        tbprof.mark_step()
        train_step()
try:
    tbprof.stop()
except tbprof.CaptureError as e:
    print("stop without a capture:", type(e).__name__)
print("done")
