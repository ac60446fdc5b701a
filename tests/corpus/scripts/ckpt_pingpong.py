"""A checkpoint every few steps written the way many scripts do it: the model is moved to the CPU to save its
state_dict (so the file loads without a GPU), then moved back to the device to carry on training: every parameter
goes to the host and back at each checkpoint."""
import io

import torch
from torch import nn

STEPS = 12
CKPT_EVERY = 3


class MLP(nn.Module):
    def __init__(self, dims=(128, 512, 512, 512, 10)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = MLP().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(STEPS, 256, 128)
    target = torch.randint(0, 10, (STEPS, 256))
    checkpoints = []
    for step in range(STEPS):
        x, y = data[step].to(device), target[step].to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % CKPT_EVERY == 0:
            model.cpu()
            buf = io.BytesIO()
            torch.save(model.state_dict(), buf)
            checkpoints.append(buf.getvalue())
            model.to(device)  # back to the device for the next steps
    print(f"{len(checkpoints)} checkpoints, {len(checkpoints[-1])} bytes each")


if __name__ == "__main__":
    main()
