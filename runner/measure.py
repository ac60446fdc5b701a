"""The measurement loop: warm-up, then measured iterations bracketed by
tbprof markers, timed like TorchBench's run.py (CPU wall time with
time.perf_counter_ns, GPU time with CUDA events, medians over the measured
iterations)."""
import resource
import statistics
import time

import torch

from runner import marks

GIB = 1024 ** 3


def output_checksum(tree):
	"""Sum of the magnitudes of every element of an output nest, in float64:
	a cheap fingerprint to compare two runs of the same model and seed
	(magnitudes, so outputs centred on zero do not cancel to ~0)."""
	total = 0.0
	if isinstance(tree, torch.Tensor):
		return float(tree.detach().abs().to(torch.float64).sum())
	if isinstance(tree, dict):
		tree = list(tree.values())
	if isinstance(tree, (list, tuple)):
		for item in tree:
			total += output_checksum(item)
		return total
	if isinstance(tree, (int, float)):
		return abs(float(tree))
	return 0.0


def loss_value(loss):
	if isinstance(loss, torch.Tensor):
		return float(loss.detach().to(torch.float64).sum())
	return float(loss)


def cpu_peak_memory_gib():
	# ru_maxrss is in KiB on Linux.
	return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB


class Result:
	def __init__(self):
		self.cpu_wall_ms = []
		self.gpu_ms = []
		self.losses = []
		self.output_checksum = None
		self.cpu_peak_gib = None
		self.gpu_peak_gib = None

	def median_cpu_wall_ms(self):
		return statistics.median(self.cpu_wall_ms)

	def median_gpu_ms(self):
		return statistics.median(self.gpu_ms) if self.gpu_ms else None


def _duration(ms):
	return "%.2f s" % (ms / 1000) if ms >= 1000 else "%.1f ms" % ms


def _progress(out, what, index, count, cpu_ms, gpu_ms=None):
	"""One line per iteration on stderr (stdout keeps TorchBench's lines alone):
	printed after the iteration's end marker, so outside what is measured."""
	if out is None:
		return
	gpu = ", GPU %s" % _duration(gpu_ms) if gpu_ms is not None else ""
	print("run.py: %s %d of %d: %s%s" % (what, index + 1, count, _duration(cpu_ms), gpu), file=out, flush=True)


def run(bench, label, niter, nwarmup, progress=None):
	"""Runs nwarmup + niter iterations of bench.train or bench.eval; with a
	file as `progress`, says each iteration's time there."""
	step = bench.train if bench.test == "train" else bench.eval
	on_cuda = bench.device_type == "cuda"
	result = Result()
	loss_tensors = []
	last_output = None

	def keep(output):
		nonlocal last_output
		if bench.test == "train":
			# A detached tensor: converting it now would add a device sync
			# to the profiled iteration.
			loss_tensors.append(output)
		else:
			last_output = output

	if on_cuda:
		torch.cuda.synchronize()
		torch.cuda.reset_peak_memory_stats(bench.device)
	for index in range(nwarmup):
		t0 = time.perf_counter_ns()
		keep(step())
		_progress(progress, "warm-up", index, nwarmup, (time.perf_counter_ns() - t0) / 1e6)
	if on_cuda:
		torch.cuda.synchronize()
	marks.mark(marks.WARMUP_END, nwarmup, label)

	for index in range(niter):
		marks.mark(marks.ITER_BEGIN, index, label)
		if on_cuda:
			start_event = torch.cuda.Event(enable_timing=True)
			end_event = torch.cuda.Event(enable_timing=True)
			start_event.record()
		t0 = time.perf_counter_ns()
		keep(step())
		if on_cuda:
			end_event.record()
		t1 = time.perf_counter_ns()
		if on_cuda:
			# As TorchBench: CPU wall time is the host's time to issue the
			# iteration; the sync makes the GPU time (and the end marker)
			# cover all of the iteration's device work.
			torch.cuda.synchronize()
			result.gpu_ms.append(start_event.elapsed_time(end_event))
		marks.mark(marks.ITER_END, index, label)
		result.cpu_wall_ms.append((t1 - t0) / 1e6)
		_progress(progress, "iteration", index, niter, result.cpu_wall_ms[-1],
			result.gpu_ms[-1] if on_cuda else None)

	result.losses = [loss_value(loss) for loss in loss_tensors]
	if last_output is not None:
		result.output_checksum = output_checksum(last_output)
	result.cpu_peak_gib = cpu_peak_memory_gib()
	if on_cuda:
		result.gpu_peak_gib = torch.cuda.max_memory_reserved(bench.device) / GIB
	return result
