#!/usr/bin/env python3
"""Runs every model of the zoo (or those named) in one process at the small
config: one training iteration and one eval iteration each, and prints one
JSON object {model: {"train_loss": float, "eval_checksum": float}}.

The preload test runs this with and without LD_PRELOAD=libtbprof.so and
compares; tests/runner/test_zoo.py imports run_model."""
import json
import os
import sys

SOURCE_ROOT = os.environ.get("TBP_SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(
	os.path.abspath(__file__))))
sys.path.insert(0, SOURCE_ROOT)

from runner import marks, measure, zoo  # noqa: E402

SMALL_ARGS = ["--small"]


def run_model(name, test, seed=1337, niter=1, batch_size=1, extra_args=()):
	"""Builds models/<name> at the small config and runs niter iterations
	through the runner's measurement loop; returns the measure.Result."""
	model_class = zoo.load_model_class(name)
	bench = model_class(test=test, device="cpu", batch_size=batch_size,
		extra_args=SMALL_ARGS + ["--seed", str(seed)] + list(extra_args))
	return measure.run(bench, name, niter=niter, nwarmup=0)


def main(names):
	names = names or zoo.list_models()
	report = {}
	for name in names:
		train = run_model(name, "train")
		evaluation = run_model(name, "eval")
		report[name] = {"train_loss": train.losses[0], "eval_checksum": evaluation.output_checksum}
	report["_tbprof_loaded"] = marks.available()
	json.dump(report, sys.stdout, indent=1, sort_keys=True)
	print()
	return 0


if __name__ == "__main__":
	sys.exit(main(sys.argv[1:]))
