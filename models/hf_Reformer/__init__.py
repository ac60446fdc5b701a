"""hf_Reformer as in TorchBench: transformers' ReformerForMaskedLM built from
ReformerConfig(num_buckets=128), sequence length 4096, train batch 8, eval
batch 1.  Its LSH self-attention ends in _len_and_dim_norm, the function the
paper (Listing 3) found copying a scalar host-to-device on every call.

Reformer needs the sequence length to equal the product of axial_pos_shape
(the default (64, 64) gives 4096) and to be a multiple of the attention chunk
lengths (64).  --small / TBP_SMALL=1: sequence 128 (axial shape (8, 16)),
hidden 64, same layer pattern and num_buckets.

Seeding: in training, each ReformerLayer re-seeds the global RNG before its
attention and feed-forward halves (so the reversible backward pass can
replay the same dropout and LSH rotations) with a seed from torch.seed(),
i.e. from the OS: two runs would never give the same loss.  Each layer here
draws that seed from torch's seeded generator instead; everything else in
the layer is transformers' own code."""
import sys
import types

import torch

from runner.hf import HuggingFaceModel
from runner.tasks import NLP


def _seeded_attention_seed(layer):
	layer.attention_seed = int(torch.randint(0, sys.maxsize, (1,)).item())
	torch.manual_seed(layer.attention_seed)


def _seeded_feed_forward_seed(layer):
	layer.feed_forward_seed = int(torch.randint(0, sys.maxsize, (1,)).item())
	torch.manual_seed(layer.feed_forward_seed)


class Model(HuggingFaceModel):
	task = NLP.LANGUAGE_MODELING
	DESCRIPTION = "Reformer masked LM (LSH attention), seq 4096"
	DEFAULT_TRAIN_BSIZE = 8
	DEFAULT_EVAL_BSIZE = 1
	HF_CLASS = "ReformerForMaskedLM"
	SEQ_LEN = 4096
	SMALL_SEQ_LEN = 128

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		super().__init__(test=test, device=device, batch_size=batch_size, extra_args=extra_args)
		for layer in self.model.reformer.encoder.layers:
			layer._init_attention_seed = types.MethodType(_seeded_attention_seed, layer)
			layer._init_feed_forward_seed = types.MethodType(_seeded_feed_forward_seed, layer)

	def make_config(self, small):
		from transformers import ReformerConfig
		if small:
			return ReformerConfig(num_buckets=128, axial_pos_shape=(8, 16), max_position_embeddings=128,
				hidden_size=64, num_attention_heads=2, attention_head_size=32, feed_forward_size=128,
				axial_pos_embds_dim=(32, 32))
		# The defaults already give axial_pos_shape (64, 64) = 4096 positions.
		config = ReformerConfig(num_buckets=128)
		assert config.axial_pos_shape[0] * config.axial_pos_shape[1] == self.SEQ_LEN
		return config
