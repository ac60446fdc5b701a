"""A PyTorch Lightning-style setup: a LightningModule subclass with training_step(batch, batch_idx) and
configure_optimizers, run by a small Trainer.fit() loop (automatic optimization: the framework calls backward,
optimizer.step and zero_grad).  The module keeps a Python-float temperature and builds a device tensor from it
in every training_step (a host-to-device copy of one scalar per step)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LightningModule(nn.Module):
    """The framework's base class (what the user subclasses)."""

    def __init__(self):
        super().__init__()
        self._logged = {}

    @property
    def device(self):
        return next(self.parameters()).device

    def log(self, name, value):
        self._logged.setdefault(name, []).append(value.detach())

    def configure_optimizers(self):
        raise NotImplementedError


class Trainer:
    """The framework's fit loop."""

    def __init__(self, max_epochs, accelerator="auto"):
        self.max_epochs = max_epochs
        self.device = "cuda" if accelerator == "auto" and torch.cuda.is_available() else "cpu"
        self.global_step = 0

    def _to_device(self, batch):
        return [t.to(self.device, non_blocking=True) for t in batch]

    def _run_optimization(self, module, optimizer, batch, batch_idx):
        optimizer.zero_grad()
        loss = module.training_step(batch, batch_idx)
        loss.backward()
        optimizer.step()
        self.global_step += 1

    def fit(self, module, train_dataloaders):
        module.to(self.device)
        module.train()
        optimizer = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            for batch_idx, batch in enumerate(train_dataloaders):
                self._run_optimization(module, optimizer, self._to_device(batch), batch_idx)
            epoch_loss = torch.stack(module._logged["train_loss"][-len(train_dataloaders):]).mean()
            print(f"epoch {epoch} global_step {self.global_step} train_loss {epoch_loss.item():.4f}")


class ContrastiveModel(LightningModule):
    def __init__(self, dim=64, hidden=256, temperature=0.07):
        super().__init__()
        self.temperature = temperature
        self.encoder = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, 64))

    def training_step(self, batch, batch_idx):
        view_a, view_b = batch
        za = nn.functional.normalize(self.encoder(view_a), dim=1)
        zb = nn.functional.normalize(self.encoder(view_b), dim=1)
        temperature = torch.tensor(self.temperature, device=self.device)
        logits = za @ zb.T / temperature
        targets = torch.arange(logits.shape[0], device=self.device)
        loss = nn.functional.cross_entropy(logits, targets)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


if __name__ == "__main__":
    torch.manual_seed(0)
    base = torch.randn(256, 64)
    views = TensorDataset(base + 0.1 * torch.randn_like(base), base + 0.1 * torch.randn_like(base))
    loader = DataLoader(views, batch_size=64, shuffle=False)
    Trainer(max_epochs=3).fit(ContrastiveModel(), loader)
