"""dlrm: the Deep Learning Recommendation Model architecture (Naumov et al.,
2019), implemented here: a bottom MLP over the dense features, one
sum-pooled EmbeddingBag per categorical feature, the pairwise dot-product
interaction of all those vectors (strict lower triangle), concatenated with
the bottom MLP's output into a top MLP that predicts a click logit.

Configuration is the Criteo Kaggle one (13 dense features, 26 categorical
features, embedding dimension 16, bottom MLP 13-512-256-64-16, top MLP
512-256-1) with the tables' published cardinalities capped at 1M rows so the
tables (about 420 MB) fit this 24 GiB / 2-core machine next to other work;
--small caps them at 1000 rows.  Random dense features, random indices, random
click labels; sparse-gradient SGD as in the reference implementation.
Train and eval batch 1000 as in TorchBench."""
import torch
from torch import nn

from runner.model import BenchmarkModel
from runner.tasks import RECOMMENDATION

# Criteo Kaggle Display Advertising Challenge: rows of the 26 categorical features.
CRITEO_KAGGLE_CARDINALITIES = (
	1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
	27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572)
ROW_CAP = 1_000_000
SMALL_ROW_CAP = 1000
DENSE_FEATURES = 13
EMBEDDING_DIM = 16
BOTTOM_MLP = (512, 256, 64, EMBEDDING_DIM)
TOP_MLP = (512, 256, 1)
INDICES_PER_LOOKUP = 1


def mlp(in_features, widths, last_activation):
	layers = []
	for i, width in enumerate(widths):
		layers.append(nn.Linear(in_features, width))
		if i + 1 < len(widths) or last_activation:
			layers.append(nn.ReLU())
		in_features = width
	return nn.Sequential(*layers)


class DLRM(nn.Module):
	def __init__(self, table_rows):
		super().__init__()
		self.bottom_mlp = mlp(DENSE_FEATURES, BOTTOM_MLP, last_activation=True)
		self.tables = nn.ModuleList(
			nn.EmbeddingBag(rows, EMBEDDING_DIM, mode="sum", sparse=True) for rows in table_rows)
		vectors = 1 + len(table_rows)
		rows, cols = torch.tril_indices(vectors, vectors, offset=-1)
		self.register_buffer("pair_rows", rows, persistent=False)
		self.register_buffer("pair_cols", cols, persistent=False)
		self.top_mlp = mlp(EMBEDDING_DIM + rows.numel(), TOP_MLP, last_activation=False)

	def forward(self, dense, indices, offsets):
		# dense (B, 13); indices (tables, B * lookups); offsets (tables, B)
		bottom = self.bottom_mlp(dense)
		pooled = [table(indices[i], offsets[i]) for i, table in enumerate(self.tables)]
		vectors = torch.stack([bottom] + pooled, dim=1)                 # (B, 27, 16)
		dots = torch.bmm(vectors, vectors.transpose(1, 2))              # (B, 27, 27)
		interactions = dots[:, self.pair_rows, self.pair_cols]          # (B, 351)
		return self.top_mlp(torch.cat([bottom, interactions], dim=1)).squeeze(1)


class Model(BenchmarkModel):
	task = RECOMMENDATION.RECOMMENDATION
	DESCRIPTION = "DLRM, Criteo Kaggle shapes, tables capped at 1M rows"
	DEFAULT_TRAIN_BSIZE = 1000
	DEFAULT_EVAL_BSIZE = 1000
	# Sparse embedding gradients: fp16/bf16 weights are left to amp.
	SUPPORTED_PRECISIONS = ("fp32", "tf32", "amp")

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		super().__init__(test=test, device=device, batch_size=batch_size, extra_args=extra_args)
		cap = SMALL_ROW_CAP if self.small else ROW_CAP
		table_rows = [min(rows, cap) for rows in CRITEO_KAGGLE_CARDINALITIES]
		self.model = DLRM(table_rows).to(self.device)
		batch = self.batch_size
		dense = torch.log1p(torch.rand(batch, DENSE_FEATURES, device=self.device) * 100)
		indices = torch.stack([
			torch.randint(0, rows, (batch * INDICES_PER_LOOKUP,), device=self.device) for rows in table_rows])
		offsets = (torch.arange(batch, device=self.device) * INDICES_PER_LOOKUP).expand(len(table_rows), batch).contiguous()
		self.example_inputs = (dense, indices, offsets)
		if test == "train":
			self.clicks = torch.randint(0, 2, (batch,), device=self.device).float()
			self.loss_fn = nn.BCEWithLogitsLoss()
			self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

	def compute_loss(self, output):
		return self.loss_fn(output.float(), self.clicks)

	def eval(self):
		with torch.no_grad(), self.autocast():
			return torch.sigmoid(self.forward())
