# A notebook's cells (jupytext percent format: a cell starts at each "# %%" line), run one cell at a time by
# notebook_ipykernel.py and notebook_ipython.py as a kernel runs them.
# %%
import torch
import torch.nn as nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
xs = torch.randn(12, 128, 48)
ys = torch.randint(0, 4, (12, 128))

# %%
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(48, 96), nn.GELU(), nn.Linear(96, 96), nn.GELU())
        self.head = nn.Linear(96, 4)

    def forward(self, x):
        return self.head(self.body(x))


def label_smoothing(step):
    # a host float made into a device tensor every step
    return torch.tensor(0.05 + 0.001 * step, device=dev)


net = Net().to(dev)
opt = torch.optim.AdamW(net.parameters(), lr=3e-4)

# %%
history = []
for step in range(12):
    x, y = xs[step].to(dev), ys[step].to(dev)
    eps = label_smoothing(step)
    logits = net(x)
    loss = nn.functional.cross_entropy(logits, y) * (1 - eps)
    opt.zero_grad()
    loss.backward()
    opt.step()
    history.append(loss.item())  # the notebook's running loss, read every step

# %%
print(f"{len(history)} steps, last loss {history[-1]:.3f}")
