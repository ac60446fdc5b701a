"""run.py's command line, TorchBench-compatible:

	python run.py -m MODEL [-d cpu|cuda] [-t train|eval] [--bs N] [--niter N]
	              [--precision fp32|tf32|fp16|bf16|amp] [--backend eager|inductor]
	              [--export-metrics FILE.json] [MODEL-SPECIFIC ARGS...]
	python run.py --list

Arguments run.py does not know are passed to the model as extra_args (as
TorchBench does); a model rejects those it does not know.  Exit codes: 0 ok,
2 bad input (unknown model, bad option, unsupported mode, no CUDA).
"""
import argparse
import os
import json
import platform
import sys

EXIT_OK = 0
EXIT_BAD_INPUT = 2
DEFAULT_NITER = 10
DEFAULT_NWARMUP = 3


def _int(text, what):
	try:
		return int(text)
	except ValueError:
		raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None


def _unwritable(path):
	"""Why `path` cannot be written (None when it can); leaves no new file."""
	try:
		if os.path.exists(path):
			open(path, "a").close()
		else:
			open(path, "x").close()
			os.unlink(path)
	except OSError as error:
		return error.strerror
	return None


def _positive_int(text):
	value = _int(text, "a positive integer")
	if value < 1:
		raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
	return value


def _non_negative_int(text):
	value = _int(text, "zero or more")
	if value < 0:
		raise argparse.ArgumentTypeError(f"must be zero or more, not {text}")
	return value


def _device(text):
	if text == "cpu" or text == "cuda" or (text.startswith("cuda:") and text[5:].isdigit()):
		return text
	raise argparse.ArgumentTypeError(f"must be cpu, cuda or cuda:N, not {text!r}")


def build_parser():
	# runner.options, not runner.model: bad options fail before torch loads.
	from runner.options import BACKENDS, DEFAULT_SEED, PRECISIONS
	parser = argparse.ArgumentParser(
		prog="run.py",
		description="Run one TorchBench-style model: warm-up, then measured iterations "
			"bracketed by tbprof iteration markers.",
		epilog="Unknown arguments go to the model (e.g. --small, or paper_antipatterns' --fixed).")
	parser.add_argument("model_pos", nargs="?", metavar="MODEL", help="model name (or -m)")
	parser.add_argument("-m", "--model", help="model name (models/<name>/)")
	parser.add_argument("-d", "--device", type=_device, default="cpu", help="cpu or cuda (default cpu)")
	parser.add_argument("-t", "--test", choices=("train", "eval"), default="eval", help="default eval")
	parser.add_argument("--bs", type=_positive_int, help="batch size (default: the model's)")
	parser.add_argument("--niter", type=_positive_int, default=DEFAULT_NITER,
		help=f"measured iterations (default {DEFAULT_NITER})")
	parser.add_argument("--nwarmup", type=_non_negative_int, default=DEFAULT_NWARMUP,
		help=f"warm-up iterations before the measured ones (default {DEFAULT_NWARMUP})")
	parser.add_argument("--precision", choices=PRECISIONS, default="fp32")
	parser.add_argument("--backend", choices=BACKENDS, default="eager")
	parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"RNG seed (default {DEFAULT_SEED})")
	parser.add_argument("--small", action="store_true",
		help="shrunken model config for quick CPU tests (same as TBP_SMALL=1)")
	parser.add_argument("--export-metrics", metavar="FILE.json", help="write the measurements as JSON")
	parser.add_argument("--no-progress", action="store_true",
		help="no progress line per iteration on stderr (iteration i of n and its time)")
	parser.add_argument("--list", action="store_true", help="list the model zoo with domains and exit")
	return parser


def print_zoo(out=sys.stdout):
	from runner import zoo
	from runner.tasks import domain_of
	rows = []
	for name in zoo.list_models():
		model_class = zoo.load_model_class(name)
		sizes = []
		for test in ("train", "eval"):
			bs, cpu = model_class.default_batch_size(test, "cuda"), model_class.default_batch_size(test, "cpu")
			sizes.append(str(bs) if bs == cpu else f"{bs} (cpu {cpu})")
		rows.append((name, domain_of(model_class.task), model_class.task.split(".", 1)[1], sizes[0], sizes[1],
			model_class.DESCRIPTION))
	header = ("model", "domain", "task", "train_bs", "eval_bs", "description")
	widths = [max(len(row[i]) for row in rows + [header]) for i in range(5)]
	for row in [header] + rows:
		cells = [row[i].ljust(widths[i]) for i in range(5)] + [row[5]]
		print("  ".join(cells).rstrip(), file=out)


def _line(label, value):
	# TorchBench's layout: '{:<20} {:>20}'
	print("{:<20} {:>20}".format(label, value))


def main(argv=None):
	parser = build_parser()
	args, extra_args = parser.parse_known_args(argv)
	if args.list:
		print_zoo()
		return EXIT_OK
	if args.model and args.model_pos and args.model != args.model_pos:
		parser.error(f"two model names given: {args.model_pos!r} and -m {args.model!r}")
	name = args.model or args.model_pos
	if not name:
		parser.error("no model given (use -m MODEL; `python run.py --list` shows the zoo)")

	# Before the run, not after it: a long benchmark must not end in
	# "cannot write the metrics".
	if args.export_metrics:
		problem = _unwritable(args.export_metrics)
		if problem:
			print(f"run.py: error: --export-metrics {args.export_metrics}: {problem}", file=sys.stderr)
			return EXIT_BAD_INPUT

	from runner import zoo
	try:
		model_class = zoo.load_model_class(name)
	except zoo.UnknownModel as error:
		parser.error(str(error))

	import torch
	from runner import marks, measure
	from runner.model import ModelArgError, NotSupported
	if args.device.startswith("cuda") and not torch.cuda.is_available():
		parser.error(f"device {args.device} requested but torch.cuda.is_available() is False")

	model_args = list(extra_args) + ["--precision", args.precision, "--backend", args.backend,
		"--seed", str(args.seed)]
	if args.small:
		model_args.append("--small")
	try:
		bench = model_class(test=args.test, device=args.device, batch_size=args.bs, extra_args=model_args)
	except ModelArgError as error:
		parser.error(f"model {name}: {error}")
	except NotSupported as error:
		parser.error(f"model {name}, {args.test} on {args.device}: {error}")

	print(f"Running {args.test} method from {name} on {args.device} in {args.backend} mode "
		f"with input batch size {bench.batch_size} and precision {args.precision}.", flush=True)
	try:
		result = measure.run(bench, name, args.niter, args.nwarmup, None if args.no_progress else sys.stderr)
	except NotSupported as error:
		parser.error(f"model {name}, {args.test} on {args.device}: {error}")

	# On CPU the GPU lines are omitted, as TorchBench's run.py does.
	if result.gpu_ms:
		_line("GPU Time per batch:", "%.3f milliseconds" % result.median_gpu_ms())
	_line("CPU Wall Time per batch:", "%.3f milliseconds" % result.median_cpu_wall_ms())
	if result.gpu_peak_gib is not None:
		device_index = torch.device(args.device).index or 0
		_line("GPU %d Peak Memory:" % device_index, "%.4f GB" % result.gpu_peak_gib)
	_line("CPU Peak Memory:", "%.4f GB" % result.cpu_peak_gib)

	if args.export_metrics:
		metrics = {
			"name": name,
			"test": args.test,
			"device": args.device,
			"batch_size": bench.batch_size,
			"precision": args.precision,
			"backend": args.backend,
			"niter": args.niter,
			"nwarmup": args.nwarmup,
			"seed": args.seed,
			"small": bench.small,
			"extra_args": extra_args,
			"tbprof_loaded": marks.available(),
			"environ": {
				"python": platform.python_version(),
				"torch": torch.__version__,
				"threads": torch.get_num_threads(),
			},
			"metrics": {
				"cpu_wall_time_ms": result.median_cpu_wall_ms(),
				"cpu_wall_time_ms_per_iter": result.cpu_wall_ms,
				"gpu_time_ms": result.median_gpu_ms(),
				"gpu_time_ms_per_iter": result.gpu_ms,
				"cpu_peak_mem_gb": result.cpu_peak_gib,
				"gpu_peak_mem_gb": result.gpu_peak_gib,
			},
			# Every iteration's loss (warm-up included), in order.
			"losses": result.losses,
			"output_checksum": result.output_checksum,
		}
		try:
			with open(args.export_metrics, "w") as out:
				json.dump(metrics, out, indent=1)
				out.write("\n")
		except OSError as error:
			print(f"run.py: error: --export-metrics {args.export_metrics}: {error.strerror}", file=sys.stderr)
			return EXIT_BAD_INPUT
	return EXIT_OK
