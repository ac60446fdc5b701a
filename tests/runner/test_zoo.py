"""Every model of the zoo, on CPU at the small config (--small) and batch 1:
TorchBench's interface, one training and one eval iteration, seeding."""
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo_losses import run_model  # noqa: E402

from runner import zoo  # noqa: E402
from runner.tasks import DOMAINS, domain_of  # noqa: E402

MODELS = zoo.list_models()
REQUIRED = ("hf_Reformer", "hf_Bert", "resnet50", "mobilenet_v2", "dlrm", "soft_actor_critic",
	"speech_conformer", "pyhpc_equation_of_state", "dcgan", "paper_antipatterns")


def test_zoo_size_and_domains():
	assert len(MODELS) >= 12, MODELS
	for name in REQUIRED:
		assert name in MODELS
	domains = {domain_of(zoo.load_model_class(name).task) for name in MODELS}
	assert set(DOMAINS) <= domains, f"domains without a model: {set(DOMAINS) - domains}"


@pytest.mark.parametrize("name", MODELS)
def test_interface(name):
	model_class = zoo.load_model_class(name)
	assert isinstance(model_class.DEFAULT_TRAIN_BSIZE, int) and model_class.DEFAULT_TRAIN_BSIZE > 0
	assert isinstance(model_class.DEFAULT_EVAL_BSIZE, int) and model_class.DEFAULT_EVAL_BSIZE > 0
	assert domain_of(model_class.task) in DOMAINS
	bench = model_class(test="eval", device="cpu", batch_size=None, extra_args=["--small"])
	assert bench.batch_size == (model_class.DEFAULT_EVAL_BSIZE_CPU or model_class.DEFAULT_EVAL_BSIZE)
	module, example_inputs = bench.get_module()
	assert isinstance(module, torch.nn.Module)
	assert isinstance(example_inputs, (tuple, dict))
	assert not module.training, "eval models must be in eval mode"


@pytest.mark.parametrize("name", MODELS)
def test_train_and_eval_one_iteration_seeded(name):
	first = run_model(name, "train", seed=1234, niter=2)
	assert len(first.losses) == 2
	assert all(math.isfinite(loss) for loss in first.losses), first.losses
	again = run_model(name, "train", seed=1234, niter=2)
	assert again.losses == first.losses, "same seed must give the same losses"
	other = run_model(name, "train", seed=4321, niter=1)
	assert other.losses[0] != first.losses[0], "the seed must matter"

	evaluation = run_model(name, "eval", seed=1234)
	assert evaluation.output_checksum is not None and math.isfinite(evaluation.output_checksum)
	assert evaluation.output_checksum == run_model(name, "eval", seed=1234).output_checksum


def test_real_config_sizes():
	"""The default (non-small) configs are the ones the docs promise, checked
	without running them (building hf_Reformer at seq 4096 is cheap)."""
	reformer = zoo.load_model_class("hf_Reformer")(test="eval", device="cpu", extra_args=[])
	assert reformer.example_inputs["input_ids"].shape == (1, 4096)
	assert reformer.config.num_buckets == 128
	assert tuple(reformer.config.axial_pos_shape) == (64, 64)
	assert zoo.load_model_class("hf_Reformer").DEFAULT_TRAIN_BSIZE == 8


def test_cpu_default_batch():
	"""hf_Bert (quickstart's model) trains with batch 1 on the CPU by default, 4 elsewhere (TorchBench's); --bs
	still sets it."""
	bert = zoo.load_model_class("hf_Bert")
	assert bert.default_batch_size("train", "cpu") == 1 and bert.default_batch_size("train", "cuda") == 4
	assert bert.default_batch_size("eval", "cpu") == bert.default_batch_size("eval", "cuda") == 1
	assert bert(test="train", device="cpu", extra_args=["--small"]).batch_size == 1
	assert bert(test="train", device="cpu", batch_size=3, extra_args=["--small"]).batch_size == 3
	gpt2 = zoo.load_model_class("hf_GPT2")
	assert gpt2.default_batch_size("train", "cpu") == gpt2.DEFAULT_TRAIN_BSIZE


def test_unknown_extra_arg_rejected():
	from runner.model import ModelArgError
	with pytest.raises(ModelArgError, match="--bogus"):
		zoo.load_model_class("dcgan")(test="eval", device="cpu", extra_args=["--bogus"])


@pytest.mark.parametrize("precision", ["bf16", "amp"])
def test_reduced_precision(precision):
	result = run_model("paper_antipatterns", "train", extra_args=["--precision", precision])
	assert math.isfinite(result.losses[0])


def test_antipatterns_fixed_same_math():
	"""--fixed changes how the work is issued, not the math (up to rounding)."""
	before = run_model("paper_antipatterns", "train", niter=2)
	after = run_model("paper_antipatterns", "train", niter=2, extra_args=["--fixed"])
	assert after.losses == pytest.approx(before.losses, rel=1e-5)


def test_equation_of_state_physics():
	eos = zoo.load_model_module("pyhpc_equation_of_state")
	f64 = dict(dtype=torch.float64)
	# Standard seawater (SA 35.16504 g/kg, CT 0 degC, p 0): about 1028.1 kg/m^3.
	rho = eos.density(torch.tensor([35.16504], **f64), torch.tensor([0.0], **f64), torch.tensor([0.0], **f64))
	assert rho.item() == pytest.approx(1028.1, abs=0.2)
	# dH/dCT against a central difference of the (independently integrated) enthalpy.
	sa, ct, p = (torch.tensor([35.0, 38.0], **f64), torch.tensor([10.0, 2.0], **f64), torch.tensor([1000.0, 5000.0], **f64))

	def enthalpy(temperature):
		import numpy as np
		nodes, weights = np.polynomial.legendre.leggauss(24)
		total = torch.zeros_like(temperature)
		for node, weight in zip(nodes, weights):
			total = total + weight / eos.density(sa, temperature, p * 0.5 * (node + 1))
		return 1e4 * 0.5 * p * total

	step = 1e-3
	numeric = (enthalpy(ct + step) - enthalpy(ct - step)) / (2 * step)
	assert torch.allclose(eos.dynamic_enthalpy_dct(sa, ct, p), numeric, rtol=1e-6)


def test_small_mode_from_environment(monkeypatch):
	model_class = zoo.load_model_class("hf_Bert")
	monkeypatch.setenv("TBP_SMALL", "1")
	assert model_class(test="eval", device="cpu", extra_args=[]).seq_len == model_class.SMALL_SEQ_LEN
	monkeypatch.setenv("TBP_SMALL", "0")
	bench = model_class(test="eval", device="cpu", extra_args=["--small"])
	assert bench.small and bench.seq_len == model_class.SMALL_SEQ_LEN
