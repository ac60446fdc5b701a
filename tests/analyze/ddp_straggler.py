"""A CPU DDP training loop (gloo) for the ranks-real-ddp test, run by
torch.distributed.run: rank STRAGGLER (env, default 1; -1 none) spends
STRAGGLER_MS (default 20) ms more than the others in slow_rank_work every
step, so the other ranks wait for it in DDP's gradient all-reduce (MODE=allreduce:
no DDP, one dist.all_reduce per parameter gradient; DEVICE=cuda: the model
on the GPU, simgpu's under simtorch)."""
import os, sys, time
import torch
import torch.distributed as dist
import torch.nn as nn


def slow_rank_work(rank, straggler, ms):
    # The planted straggler: one rank does extra work every step.
    if rank == straggler:
        time.sleep(ms / 1000.0)


def average_gradients(model, world):
    # Data parallelism by hand: one all_reduce per parameter.
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world


def train_step(ddp, opt, x, y, rank, straggler, ms):
    slow_rank_work(rank, straggler, ms)
    opt.zero_grad()
    loss = nn.functional.mse_loss(ddp(x), y)
    loss.backward()
    if not isinstance(ddp, nn.parallel.DistributedDataParallel):
        average_gradients(ddp, dist.get_world_size())
    opt.step()
    return loss


def main():
    straggler = int(os.environ.get("STRAGGLER", "1"))
    ms = float(os.environ.get("STRAGGLER_MS", "20"))
    steps = int(os.environ.get("STEPS", "12"))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
    dev = os.environ.get("DEVICE", "cpu")
    model.to(dev)
    # MODE=allreduce: no DDP, gradients all-reduced by hand.
    ddp = model if os.environ.get("MODE") == "allreduce" else nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(64, 256, device=dev)
    y = torch.randn(64, 256, device=dev)
    for i in range(steps):
        loss = train_step(ddp, opt, x, y, rank, straggler, ms)
    dist.destroy_process_group()
    print(f"rank {rank} done")


if __name__ == "__main__":
    main()
