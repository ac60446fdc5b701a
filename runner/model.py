"""Base class of every model in models/<name>/, with TorchBench's interface:

	Model(test, device, batch_size=None, extra_args=[])
	get_module()  -> (module, example_inputs)
	train()       -> one training step; returns the (detached) loss tensor
	eval()        -> one inference step; returns the model's output
	DEFAULT_TRAIN_BSIZE, DEFAULT_EVAL_BSIZE, task (domain.task)

A subclass calls super().__init__ first (it seeds every RNG and parses the
common extra args), then builds self.model, self.example_inputs and, for
training, self.optimizer.  After the subclass's __init__ returns, the
metaclass runs _post_init, which applies precision and backend, so a model
never has to handle them itself unless its structure is unusual.

Returning the loss as a tensor (not a float) keeps train() free of the
device-to-host sync a .item() would add to every profiled iteration; the
runner converts the losses after the measured loop.
"""
import argparse
import contextlib
import os
import random

import numpy as np
import torch

from runner.options import BACKENDS, DEFAULT_SEED, PRECISIONS  # noqa: F401 (re-exported)
from runner.tasks import OTHER


class ModelArgError(ValueError):
	"""An extra argument the model does not understand (exit 2 in run.py)."""


class NotSupported(RuntimeError):
	"""The model cannot run in the requested mode (test, precision, backend)."""


def small_mode_from_env():
	return os.environ.get("TBP_SMALL", "") not in ("", "0")


def seed_everything(seed):
	random.seed(seed)
	np.random.seed(seed % (2 ** 32))
	torch.manual_seed(seed)


def cast_floating(tree, dtype):
	"""Casts every floating tensor in a nest of tuples/lists/dicts."""
	if isinstance(tree, torch.Tensor):
		return tree.to(dtype) if tree.is_floating_point() else tree
	if isinstance(tree, tuple):
		return tuple(cast_floating(item, dtype) for item in tree)
	if isinstance(tree, list):
		return [cast_floating(item, dtype) for item in tree]
	if isinstance(tree, dict):
		return {key: cast_floating(value, dtype) for key, value in tree.items()}
	return tree


class _RunsPostInit(type):
	# TorchBench-style: precision/backend are applied once the subclass has
	# built its module, whatever the subclass's __init__ looks like.
	def __call__(cls, *args, **kwargs):
		instance = super().__call__(*args, **kwargs)
		instance._post_init()
		return instance


class BenchmarkModel(metaclass=_RunsPostInit):
	task = OTHER.OTHER_TASKS
	DEFAULT_TRAIN_BSIZE = 1
	DEFAULT_EVAL_BSIZE = 1
	# On the CPU, when set: the default batch there (a model whose GPU batch
	# takes tens of seconds per iteration on a small CPU); --bs overrides.
	DEFAULT_TRAIN_BSIZE_CPU = None
	DEFAULT_EVAL_BSIZE_CPU = None
	# Precisions the model supports besides fp32; tests and run.py ask.
	SUPPORTED_PRECISIONS = PRECISIONS
	# One line shown by `run.py --list`.
	DESCRIPTION = ""

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		if test not in ("train", "eval"):
			raise ValueError(f"test must be 'train' or 'eval', not {test!r}")
		self.test = test
		self.device = str(device)
		self.device_type = torch.device(self.device).type
		self.extra_args = list(extra_args)
		parser = argparse.ArgumentParser(prog=type(self).__module__, add_help=False)
		parser.add_argument("--small", action="store_true",
			help="shrunken config (sequence length, image size, widths) for quick CPU tests")
		parser.add_argument("--precision", choices=PRECISIONS, default="fp32")
		parser.add_argument("--backend", choices=BACKENDS, default="eager")
		parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
		self.add_model_args(parser)
		parsed, unknown = parser.parse_known_args(self.extra_args)
		if unknown:
			raise ModelArgError(f"unrecognized model arguments: {' '.join(unknown)}")
		self.args = parsed
		self.small = parsed.small or small_mode_from_env()
		self.precision = parsed.precision
		self.backend = parsed.backend
		self.seed = parsed.seed
		if self.precision not in self.SUPPORTED_PRECISIONS:
			raise NotSupported(f"precision {self.precision} is not supported by this model")
		default_bs = self.default_batch_size(test, self.device_type)
		self.batch_size = int(batch_size) if batch_size else default_bs
		if self.batch_size < 1:
			raise ValueError(f"batch size must be positive, not {self.batch_size}")
		seed_everything(self.seed)
		self.model = None
		self.example_inputs = ()
		self.optimizer = None

	@classmethod
	def default_batch_size(cls, test, device_type):
		"""The batch size without --bs: the model's for `test`, its CPU one on the CPU when it has one."""
		if device_type == "cpu":
			cpu = cls.DEFAULT_TRAIN_BSIZE_CPU if test == "train" else cls.DEFAULT_EVAL_BSIZE_CPU
			if cpu:
				return cpu
		return cls.DEFAULT_TRAIN_BSIZE if test == "train" else cls.DEFAULT_EVAL_BSIZE

	@classmethod
	def add_model_args(cls, parser):
		"""Hook: a model adds its own extra args (e.g. --fixed)."""

	# -- what the metaclass runs after the subclass's __init__ ---------------
	def _post_init(self):
		self.apply_precision()
		if isinstance(self.model, torch.nn.Module):
			self.model.train(self.test == "train")
		if self.backend == "inductor":
			self.apply_backend()

	def apply_precision(self):
		if self.device_type == "cuda":
			tf32 = self.precision == "tf32"
			torch.backends.cuda.matmul.allow_tf32 = tf32
			torch.backends.cudnn.allow_tf32 = tf32
		dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(self.precision)
		if dtype is not None:
			for module in self.modules_to_cast():
				module.to(dtype)
			self.example_inputs = cast_floating(self.example_inputs, dtype)

	def modules_to_cast(self):
		return [self.model] if isinstance(self.model, torch.nn.Module) else []

	def apply_backend(self):
		self.model = torch.compile(self.model, backend="inductor")

	def autocast(self):
		if self.precision != "amp":
			return contextlib.nullcontext()
		dtype = torch.float16 if self.device_type == "cuda" else torch.bfloat16
		return torch.autocast(device_type=self.device_type, dtype=dtype)

	# -- TorchBench's interface ----------------------------------------------
	def get_module(self):
		return self.model, self.example_inputs

	def zero_grad(self):
		self.optimizer.zero_grad(set_to_none=True)

	def forward(self):
		return self.model(*self.example_inputs)

	def compute_loss(self, output):
		loss = getattr(output, "loss", None)
		if loss is None:
			raise NotImplementedError(f"{type(self).__module__}: compute_loss not defined")
		return loss

	def train(self):
		self.zero_grad()
		with self.autocast():
			loss = self.compute_loss(self.forward())
		loss.backward()
		self.optimizer.step()
		return loss.detach()

	def eval(self):
		with torch.no_grad(), self.autocast():
			return self.forward()
