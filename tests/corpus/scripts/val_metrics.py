"""Train for a few epochs, validating after each: the validation loop moves every batch's predictions to the host
(with .cpu().numpy()) to compute accuracy and macro-F1 with numpy, as one does to feed sklearn-style metrics."""
import numpy as np
import torch
from torch import nn

EPOCHS = 3
TRAIN_BATCHES = 4
VAL_BATCHES = 6
CLASSES = 8


def macro_f1(y_true, y_pred):
    scores = []
    for c in range(CLASSES):
        tp = np.sum((y_pred == c) & (y_true == c))
        fp = np.sum((y_pred == c) & (y_true != c))
        fn = np.sum((y_pred != c) & (y_true == c))
        scores.append(2 * tp / max(1, 2 * tp + fp + fn))
    return float(np.mean(scores))


@torch.no_grad()
def validate(model, val_x, val_y, device):
    model.eval()
    preds, targets = [], []
    for i in range(VAL_BATCHES):
        logits = model(val_x[i].to(device))
        preds.append(logits.argmax(dim=1).cpu().numpy())
        targets.append(val_y[i].numpy())
    model.train()
    y_pred, y_true = np.concatenate(preds), np.concatenate(targets)
    return float(np.mean(y_pred == y_true)), macro_f1(y_true, y_pred)


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    width, batch = (4096, 4096) if device == "cuda" else (384, 512)  # a small debug configuration on the CPU
    model = nn.Sequential(nn.Linear(48, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, CLASSES))
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train_x, train_y = torch.randn(TRAIN_BATCHES, batch, 48), torch.randint(0, CLASSES, (TRAIN_BATCHES, batch))
    val_x, val_y = torch.randn(VAL_BATCHES, batch, 48), torch.randint(0, CLASSES, (VAL_BATCHES, batch))
    for epoch in range(EPOCHS):
        for b in range(TRAIN_BATCHES):
            x, y = train_x[b].to(device), train_y[b].to(device)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        acc, f1 = validate(model, val_x, val_y, device)
        print(f"epoch {epoch}: val acc {acc:.3f} macro-F1 {f1:.3f}")


if __name__ == "__main__":
    main()
