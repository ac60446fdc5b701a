"""A first-time user's training loop: the training accuracy is counted sample by sample, reading each prediction
back with .item() (one host-device round trip per sample, 64 a step)."""
import torch
from torch import nn

STEPS = 6
BATCH = 64


class TextCNN(nn.Module):
    def __init__(self, vocab=2000, dim=128, classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.conv = nn.Conv1d(dim, 256, kernel_size=5, padding=2)
        self.out = nn.Linear(256, classes)

    def forward(self, tokens):
        h = torch.relu(self.conv(self.embed(tokens).transpose(1, 2)))
        return self.out(h.max(dim=2).values)


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = TextCNN().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    tokens = torch.randint(0, 2000, (STEPS, BATCH, 48))
    labels = torch.randint(0, 4, (STEPS, BATCH))
    for step in range(STEPS):
        x, y = tokens[step].to(device), labels[step].to(device)
        optimizer.zero_grad()
        outputs = model(x)
        loss = criterion(outputs, y)
        loss.backward()
        optimizer.step()
        preds = outputs.argmax(dim=1)
        correct = 0
        for i in range(len(y)):
            if preds[i].item() == y[i].item():
                correct += 1
        print(f"step {step}: loss {loss.item():.4f} train acc {correct / len(y):.3f}")


if __name__ == "__main__":
    main()
