"""A small CPU DistributedDataParallel training loop (gloo), started by
torchrun: each rank trains a two-layer MLP for a few steps; DDP's gradient
all-reduce runs every step.  Prints one line per rank at the end."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(128, 64)
    y = torch.randn(128, 8)
    for _ in range(int(os.environ.get("DDP_STEPS", "20"))):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    dist.barrier()
    print(f"rank {rank} of {world}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
