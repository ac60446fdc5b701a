"""A Hugging Face Trainer-style loop: TrainingArguments, a Trainer with compute_loss / training_step, gradient
clipping with clip_grad_norm_, a linear LR schedule, and callbacks called at the end of every step; the logging
callback turns the loss into a Python float (loss.item()) at every step."""
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


@dataclass
class TrainingArguments:
    num_train_epochs: int = 2
    per_device_train_batch_size: int = 32
    learning_rate: float = 5e-4
    max_grad_norm: float = 1.0
    logging_steps: int = 1


@dataclass
class TrainerState:
    global_step: int = 0
    epoch: float = 0.0
    log_history: list = field(default_factory=list)


class TrainerCallback:
    def on_step_end(self, args, state, logs):
        pass

    def on_epoch_end(self, args, state):
        pass


class LoggingCallback(TrainerCallback):
    def on_step_end(self, args, state, logs):
        if state.global_step % args.logging_steps == 0:
            state.log_history.append({"step": state.global_step, "loss": logs["loss"].item()})


class EpochPrinter(TrainerCallback):
    def on_epoch_end(self, args, state):
        last = state.log_history[-1] if state.log_history else {}
        print(f"epoch {state.epoch:.0f} step {state.global_step} loss {last.get('loss', float('nan')):.4f}")


class TokenDataset(Dataset):
    def __init__(self, n, seq_len=16, vocab=1000):
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(0, vocab, (n, seq_len), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class TinyClassifier(nn.Module):
    def __init__(self, vocab=1000, dim=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=128, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 2)

    def forward(self, input_ids, labels=None):
        logits = self.head(self.encoder(self.embed(input_ids)).mean(dim=1))
        return {"logits": logits}


class Trainer:
    def __init__(self, model, args, train_dataset, callbacks=()):
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = model.to(self.device)
        self.args = args
        self.train_dataset = train_dataset
        self.callbacks = list(callbacks)
        self.state = TrainerState()

    def get_train_dataloader(self):
        return DataLoader(self.train_dataset, batch_size=self.args.per_device_train_batch_size, shuffle=False)

    def create_optimizer_and_scheduler(self, num_training_steps):
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.args.learning_rate)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: max(0.0, 1.0 - s / num_training_steps))

    def _prepare_inputs(self, inputs):
        return {k: v.to(self.device) for k, v in inputs.items()}

    def compute_loss(self, model, inputs):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        return nn.functional.cross_entropy(outputs["logits"], labels)

    def training_step(self, model, inputs):
        model.train()
        inputs = self._prepare_inputs(inputs)
        loss = self.compute_loss(model, inputs)
        loss.backward()
        return loss.detach()

    def call_event(self, event, **kwargs):
        for cb in self.callbacks:
            getattr(cb, event)(self.args, self.state, **kwargs)

    def train(self):
        loader = self.get_train_dataloader()
        self.create_optimizer_and_scheduler(len(loader) * self.args.num_train_epochs)
        for epoch in range(self.args.num_train_epochs):
            for inputs in loader:
                tr_loss = self.training_step(self.model, inputs)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
                self.optimizer.step()
                self.lr_scheduler.step()
                self.model.zero_grad()
                self.state.global_step += 1
                self.call_event("on_step_end", logs={"loss": tr_loss})
            self.state.epoch = epoch + 1
            self.call_event("on_epoch_end")
        return self.state


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = Trainer(TinyClassifier(), TrainingArguments(), TokenDataset(160),
                      callbacks=[LoggingCallback(), EpochPrinter()])
    trainer.train()
