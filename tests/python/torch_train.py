"""Child of test_torch.py: a small deterministic CPU training loop; prints
the loss of every step.  With argv[1] == 'compile' it also runs a
torch.compile'd function (Dynamo with the "eager" backend: inductor's first
compile takes ~40 s on the 2-core CI machine) and checks it against eager."""
import ctypes
import sys

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(64, 32)
y = torch.randn(64, 1)
process = ctypes.CDLL(None)
marker = getattr(process, "tbprof_marker", None)  # present under the preload
if marker:
    marker.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_char_p]


def train_step():  # site:train_step
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def main(steps):
    for i in range(steps):
        if marker:
            marker(1, i, None)
        loss = train_step()  # site:train_call
        if marker:
            marker(2, i, None)
        print("loss %d %.9g" % (i, loss))


def compiled_check():
    def fused(a, b):
        return torch.sin(a) * b + torch.cos(b).sum()

    compiled = torch.compile(fused, backend="eager")
    a, b = torch.randn(16), torch.randn(16)
    for shift in (0.0, 1.0, 2.0):  # the second and third calls reuse the compiled graph
        same = torch.allclose(compiled(a + shift, b), fused(a + shift, b))
        print("compiled %.1f %s" % (shift, same))


def after_compile(steps):
    # Dynamo installed and removed its own frame evaluator meanwhile: the
    # span hook must still be in place for these.
    for i in range(steps):
        loss = train_step()  # site:after_call
        print("after %d %.9g" % (i, loss))


if __name__ == "__main__":
    main(20)
    if len(sys.argv) > 1 and sys.argv[1] == "compile":
        compiled_check()
        after_compile(3)
