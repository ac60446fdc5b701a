# Kept in a folder that happens to be named "torch": still the user's own code.
import time

import torch
import torch.nn as nn


def log_to_disk(step, value):
    time.sleep(0.005)  # pretend to append to a slow log file


model = nn.Sequential(nn.Linear(100, 200), nn.ReLU(), nn.Linear(200, 100))
device = "cuda" if torch.cuda.is_available() else "cpu"
model.to(device)
sgd = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(50, 100, device=device)
for step in range(7):
    out = model(data)
    loss = out.pow(2).mean()
    sgd.zero_grad()
    loss.backward()
    sgd.step()
    log_to_disk(step, loss.detach())
