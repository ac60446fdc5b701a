"""lstm_lm: the classic word-level LSTM language model (Zaremba et al.,
2014, "medium": 2 layers of 650 units, dropout 0.5, tied input/output
embeddings, 10k-word vocabulary, 35-step truncated back-propagation through
time), trained with SGD (lr 20) and gradient-norm clipping at 0.25.  The
hidden state is carried from one iteration to the next, detached, as in
truncated BPTT.  Random token stream.  Train batch 20, eval batch 10.
--small: 64 units, vocabulary 1000."""
import torch
from torch import nn
import torch.nn.functional as F

from runner.model import BenchmarkModel
from runner.tasks import NLP

BPTT_STEPS = 35


class LSTMLanguageModel(nn.Module):
	def __init__(self, vocab, width, layers, dropout):
		super().__init__()
		self.embed = nn.Embedding(vocab, width)
		self.lstm = nn.LSTM(width, width, layers, dropout=dropout, batch_first=False)
		self.drop = nn.Dropout(dropout)
		self.decoder = nn.Linear(width, vocab)
		self.decoder.weight = self.embed.weight      # tied embeddings
		nn.init.uniform_(self.embed.weight, -0.1, 0.1)
		nn.init.zeros_(self.decoder.bias)

	def forward(self, tokens, state=None):
		output, state = self.lstm(self.drop(self.embed(tokens)), state)
		return self.decoder(self.drop(output)), state


class Model(BenchmarkModel):
	task = NLP.LANGUAGE_MODELING
	DESCRIPTION = "2-layer LSTM LM (650 units), truncated BPTT 35"
	DEFAULT_TRAIN_BSIZE = 20
	DEFAULT_EVAL_BSIZE = 10

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		super().__init__(test=test, device=device, batch_size=batch_size, extra_args=extra_args)
		self.vocab, width = (1000, 64) if self.small else (10000, 650)
		self.model = LSTMLanguageModel(self.vocab, width, 2, 0.5).to(self.device)
		stream = torch.randint(0, self.vocab, (BPTT_STEPS + 1, self.batch_size), device=self.device)
		self.example_inputs = (stream[:-1],)
		self.targets = stream[1:]
		self.state = None
		if test == "train":
			self.optimizer = torch.optim.SGD(self.model.parameters(), lr=20.0)

	def train(self):
		self.zero_grad()
		if self.state is not None:
			self.state = tuple(tensor.detach() for tensor in self.state)
		with self.autocast():
			logits, self.state = self.model(self.example_inputs[0], self.state)
			loss = F.cross_entropy(logits.float().reshape(-1, self.vocab), self.targets.reshape(-1))
		loss.backward()
		torch.nn.utils.clip_grad_norm_(self.model.parameters(), 0.25)
		self.optimizer.step()
		return loss.detach()

	def eval(self):
		with torch.no_grad(), self.autocast():
			logits, self.state = self.model(self.example_inputs[0], self.state)
		return logits
