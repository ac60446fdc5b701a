"""A notebook, run the way Jupyter's ipykernel runs it: each code cell compiled under the kernel's per-cell file name
(/tmp/ipykernel_<pid>/<hash>.py, no such file on disk; the source registered in linecache) and exec'd in the
notebook's namespace.  The training loop is written in a cell and logs loss.item() every step."""
import linecache
import os
import zlib

IMPORTS_CELL = """\
import torch
from torch import nn
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
"""

MODEL_CELL = """\
class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))

model = SmallConvNet().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images = torch.randn(10, 64, 1, 28, 28)
labels = torch.randint(0, 10, (10, 64))
"""

TRAIN_CELL = """\
losses = []
model.train()
for step in range(10):
    x = images[step].to(device)
    y = labels[step].to(device)
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
"""

REPORT_CELL = """\
print(f"first loss {losses[0]:.3f}, last loss {losses[-1]:.3f}")
"""


def cell_file_name(source):
    """ipykernel's name for a cell: a folder per kernel process, the file named by a hash of the cell's text."""
    return f"/tmp/ipykernel_{os.getpid()}/{zlib.crc32(source.encode()) * 997 % 10**10}.py"


def run_cell(source, namespace):
    name = cell_file_name(source)
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), namespace)


if __name__ == "__main__":
    user_ns = {"__name__": "__main__"}
    for cell in (IMPORTS_CELL, MODEL_CELL, TRAIN_CELL, REPORT_CELL):
        run_cell(cell, user_ns)
