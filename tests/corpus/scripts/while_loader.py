# Pull batches from a DataLoader by hand until it runs out.
import random
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Tokens(Dataset):
    """Sentences tokenized on the fly, in Python."""

    def __init__(self, n):
        rnd = random.Random(7)
        self.texts = [" ".join(rnd.choice("abcdefgh") * rnd.randint(1, 6) for _ in range(40)) for _ in range(n)]

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, i):
        ids = [sum(map(ord, w)) % 997 for w in self.texts[i].split()]
        time.sleep(0.0003)
        return torch.tensor(ids[:32] + [0] * (32 - len(ids[:32])))


def main():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    emb = torch.nn.EmbeddingBag(997, 128).to(dev)
    clf = torch.nn.Linear(128, 2).to(dev)
    opt = torch.optim.SGD(list(emb.parameters()) + list(clf.parameters()), lr=0.1)
    loader = DataLoader(Tokens(16 * 9), batch_size=16, shuffle=False, num_workers=0)
    it = iter(loader)
    n = 0
    while True:
        try:
            batch = next(it)
        except StopIteration:
            break
        batch = batch.to(dev, non_blocking=True)
        logits = clf(emb(batch))
        loss = torch.nn.functional.cross_entropy(logits, (batch[:, 0] % 2))
        opt.zero_grad()
        loss.backward()
        opt.step()
        n += 1
    print("batches", n)


main()
