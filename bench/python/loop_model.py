"""The model both Python benchmarks train: many thin layers, so per-call
Python overhead matters.  One definition, so the instruction-count run and
the timed runs measure the same work."""
import torch


def make_step(seed=0):
    """Returns step(), one SGD step of a fixed 37-layer MLP on fixed data."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    layers = []
    for _ in range(12):
        layers += [torch.nn.Linear(64, 64), torch.nn.LayerNorm(64), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    y = torch.randn(32, 1)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step
