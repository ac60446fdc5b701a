"""hf_GPT2: transformers' GPT2LMHeadModel from GPT2Config() (the 124M-parameter
GPT-2: 12 layers, hidden 768), causal LM on 512 tokens, train batch 4, eval
batch 1.  --small / TBP_SMALL=1: 2 layers, hidden 128, sequence 64."""
from runner.hf import HuggingFaceModel
from runner.tasks import NLP


class Model(HuggingFaceModel):
	task = NLP.LANGUAGE_MODELING
	DESCRIPTION = "GPT-2 (124M) causal LM, seq 512"
	DEFAULT_TRAIN_BSIZE = 4
	DEFAULT_EVAL_BSIZE = 1
	HF_CLASS = "GPT2LMHeadModel"
	SEQ_LEN = 512
	SMALL_SEQ_LEN = 64

	def make_config(self, small):
		from transformers import GPT2Config
		if small:
			return GPT2Config(n_layer=2, n_embd=128, n_head=2, n_positions=128)
		return GPT2Config()
