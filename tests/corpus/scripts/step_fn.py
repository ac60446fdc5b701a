"""Classify random blobs with a per-step function, logging the loss every step."""
import argparse

import torch
import torch.nn.functional as F


def make_model(width):
    return torch.nn.Sequential(
        torch.nn.Linear(32, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 4),
    )


def train_step(model, optimizer, inputs, labels):
    optimizer.zero_grad(set_to_none=True)
    logits = model(inputs)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    optimizer.step()
    return loss.item()  # the host waits for the GPU here every step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--width", type=int, default=384)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator().manual_seed(1)
    model = make_model(args.width).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    history = []
    for step in range(args.steps):
        inputs = torch.randn(128, 32, generator=g).to(device)
        labels = torch.randint(0, 4, (128,), generator=g).to(device)
        history.append(train_step(model, optimizer, inputs, labels))
    print("loss", history[0], "->", history[-1])


if __name__ == "__main__":
    main()
