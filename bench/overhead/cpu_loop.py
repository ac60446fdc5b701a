"""Issue #15's CPU training loop: six 256x256 Linear layers (each followed by
ReLU), Adam, batch 64, on one CPU thread.  Prints the loop's wall time, the
main thread's CPU time and the final loss, for bench_overhead.py.

    cpu_loop.py STEPS [none|profiler|profiler-stack]

profiler: the loop runs inside torch.profiler.profile(activities=[CPU]);
profiler-stack: the same with with_stack=True.  (tbprof needs no code:
bench_overhead.py runs this under LD_PRELOAD.)"""
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
mode = sys.argv[2] if len(sys.argv) > 2 else "none"
torch.manual_seed(0)
torch.set_num_threads(1)
layers = []
for _ in range(6):
    layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(64, 256)
y = torch.randn(64, 256)


def step():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


for _ in range(10):  # warm-up, outside what is timed
    step()


def run():
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(steps):
        loss = step()
    return time.perf_counter() - t0, time.thread_time() - c0, loss


if mode == "none":
    wall, cpu, loss = run()
else:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], with_stack=(mode == "profiler-stack")):
        wall, cpu, loss = run()
print("wall %.6f" % wall)
print("thread_cpu %.6f" % cpu)
print("loss %.10g" % loss.item())
