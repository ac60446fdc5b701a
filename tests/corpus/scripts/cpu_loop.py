# A CPU-only training loop (no GPU anywhere), with a slow metric each step.
import torch

torch.set_num_threads(1)
torch.manual_seed(4)

W = torch.randn(256, 256, requires_grad=True)
b = torch.zeros(256, requires_grad=True)


def forward(x):
    return torch.tanh(x @ W + b) @ W.t()


def metric(pred, target):
    # a per-row Python loop
    return sum(float((p - t).abs().max()) for p, t in zip(pred, target)) / len(pred)


lr = 1e-3
for step in range(8):
    x = torch.randn(128, 256)
    pred = forward(x)
    loss = ((pred - x) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        W -= lr * W.grad
        b -= lr * b.grad
        W.grad.zero_()
        b.grad.zero_()
    score = metric(pred.detach(), x)
print(score)
