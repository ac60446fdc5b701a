"""DDP on the CPU (gloo), the loop inline in main(); STRAGGLER_RANK does extra
work each step while making its batch.  Run with torch.distributed.run."""
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def make_batch(rank, gen):
    x = torch.randn(64, 256, generator=gen)
    if rank == int(os.environ.get("STRAGGLER_RANK", "1")):
        time.sleep(float(os.environ.get("STRAGGLER_MS", "30")) / 1000)
    return x, x.roll(1, dims=1)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(rank)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(int(os.environ.get("STEPS", "8"))):
        x, y = make_batch(rank, gen)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
