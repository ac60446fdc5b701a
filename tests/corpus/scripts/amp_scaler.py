"""Mixed-precision training (fp16 autocast + torch.amp.GradScaler), the recipe from the AMP docs with gradient
clipping after unscale_.  The initial loss scale is far too large, so the scaler finds inf gradients and skips
optimizer.step() in the first iterations while it calibrates (on the CPU: 4 of 12; on a real GPU likewise).
The loss is logged with .item() after every backward."""
import torch
from torch import nn

STEPS = 12


def make_model(device, width):
    return nn.Sequential(
        nn.Linear(64, width), nn.ReLU(),
        nn.Linear(width, width), nn.ReLU(),
        nn.Linear(width, width), nn.ReLU(),
        nn.Linear(width, 10),
    ).to(device)


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # full size on the GPU, a small debug configuration on the CPU
    width, batch = (4096, 4096) if device == "cuda" else (256, 128)
    model = make_model(device, width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 23)
    inputs = torch.randn(STEPS, batch, 64)
    targets = torch.randint(0, 10, (STEPS, batch))
    running_loss = 0.0
    for it in range(STEPS):
        x = inputs[it].to(device, non_blocking=True)
        y = targets[it].to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.float16):
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        running_loss += loss.item()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scaler.step(optimizer)  # skipped when the unscaled gradients hold inf/NaN
        scaler.update()
    first = next(model.parameters())
    taken = int(optimizer.state[first]["step"]) if first in optimizer.state else 0
    print(f"mean loss {running_loss / STEPS:.4f}, optimizer steps taken {taken} of {STEPS}")


if __name__ == "__main__":
    main()
