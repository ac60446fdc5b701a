"""Gradient accumulation: the optimizer steps once every ACCUM micro-batches."""
import os
import torch

ACCUM = int(os.environ.get("ACCUM", "4"))
MICRO = 32

torch.manual_seed(11)
device = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.GELU(), torch.nn.Linear(512, 128)).to(device)
optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randn(ACCUM * 7 * MICRO, 128)
target = torch.randn(ACCUM * 7 * MICRO, 128)

optim.zero_grad()
for i in range(data.shape[0] // MICRO):
    xb = data[i * MICRO:(i + 1) * MICRO].to(device)
    tb = target[i * MICRO:(i + 1) * MICRO].to(device)
    loss = (model(xb) - tb).pow(2).mean() / torch.tensor(float(ACCUM), device=device)
    loss.backward()
    if (i + 1) % ACCUM == 0:
        optim.step()
        optim.zero_grad()
print("done", float(loss))
