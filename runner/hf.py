"""Shared base of the Hugging Face transformers models (hf_*), after
TorchBench's HuggingFaceModel: the model is built from a config with random
weights (never from_pretrained: no downloads), fed random token ids, trained
with Adam on its own masked/causal LM loss."""
import os

# Configs are built locally; make sure nothing ever reaches for the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from runner.model import BenchmarkModel  # noqa: E402
from runner.tasks import NLP  # noqa: E402


class HuggingFaceModel(BenchmarkModel):
	task = NLP.LANGUAGE_MODELING
	HF_CLASS = None         # name in the transformers namespace, e.g. "BertForMaskedLM"
	SEQ_LEN = 512
	SMALL_SEQ_LEN = 64
	LEARNING_RATE = 1e-3

	def make_config(self, small):
		raise NotImplementedError

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		super().__init__(test=test, device=device, batch_size=batch_size, extra_args=extra_args)
		import transformers
		# Config-level notices (e.g. about loss_type) are noise in benchmark output.
		transformers.logging.set_verbosity_error()
		self.config = self.make_config(self.small)
		self.seq_len = self.SMALL_SEQ_LEN if self.small else self.SEQ_LEN
		model_class = getattr(transformers, self.HF_CLASS)
		self.model = model_class(self.config).to(self.device)
		# Token 0 is the pad id of these configs: draw real tokens only.
		input_ids = torch.randint(1, self.config.vocab_size, (self.batch_size, self.seq_len), device=self.device)
		if test == "train":
			self.example_inputs = {"input_ids": input_ids, "labels": input_ids.clone()}
			self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.LEARNING_RATE)
		else:
			self.example_inputs = {"input_ids": input_ids}

	def forward(self):
		return self.model(**self.example_inputs)

	def eval(self):
		with torch.no_grad(), self.autocast():
			return self.forward().logits
