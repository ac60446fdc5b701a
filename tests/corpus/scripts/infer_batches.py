"""Score batches with a trained-looking model: inference only, no gradients."""
import torch


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.LayerNorm(256),
                                                              torch.nn.ReLU()) for _ in range(4)])
        self.score = torch.nn.Linear(256, 1)

    def forward(self, x):
        return self.score(self.body(x)).squeeze(-1)


def make_batch(rows):
    # built on the CPU, then shipped
    return torch.randn(rows, 256) * 0.5 + 0.1


@torch.inference_mode()
def predict(model, batch, device):
    return model(batch.to(device)).sigmoid()


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(2)
    model = Scorer().to(device).eval()
    kept = []
    for b in range(15):
        scores = predict(model, make_batch(512), device)
        kept.append(scores.max().item())
    print(max(kept))
