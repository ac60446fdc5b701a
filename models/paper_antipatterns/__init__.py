"""paper_antipatterns: a small transformer language model that keeps, on
purpose, the performance bugs the TorchBench paper found (section 4.1), so
tbprof's findings can be shown on a real training loop:

1. zero_grad as before the fix of Listing 2: one p.grad.zero_() per
   parameter, i.e. one tiny kernel per parameter with the GPU idle between
   them (the fix: zero_grad(set_to_none=True), or torch._foreach_zero_).
2. hf_Reformer's _len_and_dim_norm of Listing 3: every attention call builds
   torch.tensor(attention_head_size, device=...) for torch.rsqrt, a scalar
   host-to-device copy per call (the fix: a Python-side 1/sqrt).
3. pig2's offloading (section 4.1.2): the output head lives on the CPU and is
   copied to the device and back on every step (the fix: keep it resident).
4. A loss logged with .item() on every step: a device-to-host sync per step
   (the fix: accumulate on the device, read it once).

`--fixed` (an extra argument: `python run.py -m paper_antipatterns -t train
--fixed`) runs the same model with all four fixes, for tbanalyze diff.
12 blocks of width 256, sequence 256, vocabulary 1000; train and eval batch
16.  --small: 4 blocks of width 64, sequence 32.  Plain SGD (no optimizer
state) so the offloaded head can move between devices."""
import math

import torch
from torch import nn
import torch.nn.functional as F

from runner.model import BenchmarkModel
from runner.tasks import NLP

VOCAB = 1000


class Attention(nn.Module):
	def __init__(self, width, heads, fixed):
		super().__init__()
		self.heads = heads
		self.attention_head_size = width // heads
		self.qkv = nn.Linear(width, 3 * width)
		self.out = nn.Linear(width, width)
		self.fixed = fixed

	def _len_norm(self, vectors):
		variance = vectors.pow(2).mean(-1, keepdim=True)
		return vectors * torch.rsqrt(variance + 1e-6)

	def _len_and_dim_norm(self, vectors):
		vectors = self._len_norm(vectors)
		if self.fixed:
			return vectors * (1.0 / math.sqrt(self.attention_head_size))
		# Pre-fix (paper Listing 3): a scalar tensor made, and copied to the
		# device, on every call.
		return vectors * torch.rsqrt(
			torch.tensor(self.attention_head_size, device=vectors.device, dtype=vectors.dtype))

	def forward(self, x):
		batch, length, width = x.shape
		q, k, v = self.qkv(x).view(batch, length, 3, self.heads, self.attention_head_size).permute(2, 0, 3, 1, 4)
		# Shared-QK style as Reformer's LSH attention: keys are normalized queries.
		k = self._len_and_dim_norm(k)
		scores = q @ k.transpose(-1, -2)
		mask = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
		attended = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
		return self.out(attended.transpose(1, 2).reshape(batch, length, width))


class Block(nn.Module):
	def __init__(self, width, heads, fixed):
		super().__init__()
		self.norm1 = nn.LayerNorm(width)
		self.attention = Attention(width, heads, fixed)
		self.norm2 = nn.LayerNorm(width)
		self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

	def forward(self, x):
		x = x + self.attention(self.norm1(x))
		return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
	def __init__(self, width, blocks, heads, length, fixed):
		super().__init__()
		self.embed = nn.Embedding(VOCAB, width)
		self.position = nn.Parameter(torch.randn(length, width) * 0.02)
		self.blocks = nn.ModuleList(Block(width, heads, fixed) for _ in range(blocks))
		self.norm = nn.LayerNorm(width)
		self.head = nn.Linear(width, VOCAB)

	def forward(self, tokens):
		x = self.embed(tokens) + self.position
		for block in self.blocks:
			x = block(x)
		return self.head(self.norm(x))


class Model(BenchmarkModel):
	task = NLP.LANGUAGE_MODELING
	DESCRIPTION = "transformer LM with the paper's pre-fix patterns (--fixed: without)"
	DEFAULT_TRAIN_BSIZE = 16
	DEFAULT_EVAL_BSIZE = 16

	@classmethod
	def add_model_args(cls, parser):
		parser.add_argument("--fixed", action="store_true", help="apply the paper's fixes")

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		super().__init__(test=test, device=device, batch_size=batch_size, extra_args=extra_args)
		self.fixed = self.args.fixed
		width, blocks, length = (64, 4, 32) if self.small else (256, 12, 256)
		self.model = TinyLM(width, blocks, 4, length, self.fixed).to(self.device)
		# Pre-fix: the head is "offloaded" to the host between steps.
		self.offload_head = not self.fixed and self.device_type != "cpu"
		tokens = torch.randint(0, VOCAB, (self.batch_size, length + 1), device=self.device)
		self.example_inputs = (tokens[:, :-1].contiguous(),)
		self.targets = tokens[:, 1:].contiguous()
		self.logged_loss = 0.0 if not self.fixed else torch.zeros((), device=self.device)
		if test == "train":
			self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
			# Give every parameter a .grad so the pre-fix loop zeroes all of them.
			for param in self.model.parameters():
				param.grad = torch.zeros_like(param)

	def _post_init(self):
		super()._post_init()
		if self.offload_head:
			self.model.head.to("cpu")

	def zero_grad(self):
		if self.fixed:
			self.optimizer.zero_grad(set_to_none=True)
			return
		# Pre-fix (paper Listing 2): one tiny kernel per parameter.
		for group in self.optimizer.param_groups:
			for param in group["params"]:
				if param.grad is not None:
					param.grad.zero_()

	def _head_in(self):
		if self.offload_head:
			self.model.head.to(self.device)

	def _head_out(self):
		if self.offload_head:
			self.model.head.to("cpu")

	def compute_loss(self, logits):
		return F.cross_entropy(logits.float().reshape(-1, VOCAB), self.targets.reshape(-1))

	def train(self):
		self._head_in()
		self.zero_grad()
		with self.autocast():
			loss = self.compute_loss(self.forward())
		loss.backward()
		self.optimizer.step()
		self._head_out()
		if self.fixed:
			self.logged_loss += loss.detach()
		else:
			self.logged_loss += loss.item()   # pre-fix: a sync per step, to log
		return loss.detach()

	def eval(self):
		self._head_in()
		with torch.no_grad(), self.autocast():
			logits = self.forward()
		self._head_out()
		return logits
