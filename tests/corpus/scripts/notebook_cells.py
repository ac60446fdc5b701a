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
# a wide MLP on flattened 28x28 images; a small one when there is no GPU
hidden, batch = (4096, 4096) if device == "cuda" else (256, 64)

class MLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x.flatten(1)))
        x = F.relu(self.fc2(x))
        return self.fc3(x)

model = MLP(hidden).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images = torch.randn(10, batch, 1, 28, 28)
labels = torch.randint(0, 10, (10, batch))
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
