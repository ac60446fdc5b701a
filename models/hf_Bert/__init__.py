"""hf_Bert as in TorchBench: BertForMaskedLM from BertConfig() (BERT-base:
12 layers, hidden 768), sequence length 512, train batch 4, eval batch 1.
On the CPU the train batch is 1 (--bs sets it): batch 4 takes ~20 s per
iteration on two cores, batch 1 ~3 s (quickstart's default profile).
--small / TBP_SMALL=1: 2 layers, hidden 128, sequence 64."""
from runner.hf import HuggingFaceModel
from runner.tasks import NLP


class Model(HuggingFaceModel):
	task = NLP.LANGUAGE_MODELING
	DESCRIPTION = "BERT-base masked LM, seq 512"
	DEFAULT_TRAIN_BSIZE = 4
	DEFAULT_EVAL_BSIZE = 1
	DEFAULT_TRAIN_BSIZE_CPU = 1
	HF_CLASS = "BertForMaskedLM"
	SEQ_LEN = 512
	SMALL_SEQ_LEN = 64

	def make_config(self, small):
		from transformers import BertConfig
		if small:
			return BertConfig(num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
				intermediate_size=512, max_position_embeddings=128)
		return BertConfig()
