"""run.py's command line: --list, TorchBench's output lines, metrics JSON,
errors (exit 2), extra args reaching the model, markers without tbprof."""
import os
import statistics

import pytest
import torch

from helpers import run_py, run_py_metrics
from runner import marks, zoo
from runner.tasks import DOMAINS

SMALL_TRAIN = ("--small", "-t", "train", "--bs", "2", "--niter", "2", "--nwarmup", "1")


def test_list_shows_zoo_with_domains():
	proc = run_py("--list")
	assert proc.returncode == 0, proc.stderr
	lines = proc.stdout.splitlines()
	assert lines[0].split()[:2] == ["model", "domain"]
	listed = {line.split()[0]: line.split()[1] for line in lines[1:]}
	assert sorted(listed) == zoo.list_models()
	assert set(listed.values()) == set(DOMAINS)


@pytest.mark.parametrize("args", [("-m", "no_such_model"), ("no_such_model",)])
def test_unknown_model_exit_2(args):
	proc = run_py(*args)
	assert proc.returncode == 2
	assert "no_such_model" in proc.stderr and "--list" in proc.stderr
	assert "Traceback" not in proc.stderr


def test_unknown_model_suggests_close_names():
	proc = run_py("-m", "hf_bert")
	assert proc.returncode == 2
	assert "did you mean hf_Bert" in proc.stderr


@pytest.mark.parametrize("args", [
	(),                                                  # no model
	("-m", "dcgan", "--precision", "fp8"),
	("-m", "dcgan", "-d", "tpu"),
	("-m", "dcgan", "-t", "infer"),
	("-m", "dcgan", "--bs", "0"),
	("-m", "dcgan", "--niter", "0"),
	("-m", "dcgan", "--nwarmup", "-1"),
	("-m", "dcgan", "--bogus-flag"),                     # reaches the model, which rejects it
	("-m", "dcgan", "dlrm"),                             # two names
	("-m", "dlrm", "--precision", "fp16"),               # not supported by the model
])
def test_bad_options_exit_2(args):
	proc = run_py(*args, "--small")
	assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
	assert "error:" in proc.stderr
	assert "Traceback" not in proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cuda_without_gpu_exit_2():
	proc = run_py("-m", "dcgan", "-d", "cuda", "--small")
	assert proc.returncode == 2
	assert "cuda" in proc.stderr and "Traceback" not in proc.stderr


def test_unwritable_metrics_file_exit_2(tmp_path):
	proc = run_py("-m", "pyhpc_equation_of_state", "--bs", "64", "--niter", "1", "--nwarmup", "0",
		"--export-metrics", str(tmp_path / "missing_dir" / "m.json"))
	assert proc.returncode == 2
	assert "missing_dir" in proc.stderr
	# Refused before the model runs: no benchmark output, no file left.
	assert "Running" not in proc.stdout and "CPU Wall Time" not in proc.stdout
	assert not (tmp_path / "missing_dir").exists()


def test_non_numeric_option_names_the_argument():
	proc = run_py("-m", "dcgan", "--bs", "abc")
	assert proc.returncode == 2
	assert "--bs: must be a positive integer, not 'abc'" in proc.stderr
	assert "_positive_int" not in proc.stderr


def test_torchbench_lines_and_metrics_on_cpu(tmp_path):
	proc, metrics = run_py_metrics(tmp_path, "-m", "paper_antipatterns", *SMALL_TRAIN)
	lines = proc.stdout.splitlines()
	assert lines[0].startswith("Running train method from paper_antipatterns on cpu in eager mode with input batch size 2")
	wall = [line for line in lines if line.startswith("CPU Wall Time per batch:")]
	peak = [line for line in lines if line.startswith("CPU Peak Memory:")]
	assert len(wall) == 1 and wall[0].endswith(" milliseconds")
	assert len(peak) == 1 and peak[0].endswith(" GB")
	# On CPU the GPU lines are omitted, as TorchBench does.
	assert not [line for line in lines if line.startswith("GPU")]
	per_iter = metrics["metrics"]["cpu_wall_time_ms_per_iter"]
	assert len(per_iter) == 2
	assert metrics["metrics"]["cpu_wall_time_ms"] == pytest.approx(statistics.median(per_iter))
	assert float(wall[0].split()[-2]) == pytest.approx(metrics["metrics"]["cpu_wall_time_ms"], abs=1e-3)
	assert metrics["metrics"]["cpu_peak_mem_gb"] > 0
	assert metrics["metrics"]["gpu_time_ms"] is None
	assert len(metrics["losses"]) == 3            # one warm-up + two measured
	assert metrics["batch_size"] == 2 and metrics["small"] is True
	assert metrics["tbprof_loaded"] is False


def test_progress_per_iteration_on_stderr(tmp_path):
	"""A line per iteration on stderr (warm-up and measured: i of n, its time), none on stdout, whose lines stay
	TorchBench's; --no-progress: none."""
	proc, metrics = run_py_metrics(tmp_path, "-m", "paper_antipatterns", *SMALL_TRAIN)
	progress = [line for line in proc.stderr.splitlines() if line.startswith("run.py: ")]
	assert [line.split(":")[1].strip() for line in progress] == ["warm-up 1 of 1", "iteration 1 of 2",
		"iteration 2 of 2"], proc.stderr
	for line, ms in zip(progress[1:], metrics["metrics"]["cpu_wall_time_ms_per_iter"]):
		shown = line.split(": ")[-1]
		value = float(shown.split()[0]) * (1000 if shown.endswith(" s") else 1)
		assert value == pytest.approx(ms, rel=0.01, abs=0.06), (line, ms)
	assert not [line for line in proc.stdout.splitlines() if "iteration" in line or "warm-up" in line]
	assert len(proc.stdout.splitlines()) == 3, proc.stdout   # Running ..., CPU Wall Time, CPU Peak Memory
	quiet, _ = run_py_metrics(tmp_path, "-m", "paper_antipatterns", *SMALL_TRAIN, "--no-progress", tag="quiet")
	assert "run.py: " not in quiet.stderr, quiet.stderr
	assert [line.split()[0] for line in quiet.stdout.splitlines()] == [line.split()[0] for line in
		proc.stdout.splitlines()]


def test_model_extra_args_pass_through(tmp_path):
	_, metrics = run_py_metrics(tmp_path, "-m", "paper_antipatterns", *SMALL_TRAIN, "--fixed")
	assert metrics["extra_args"] == ["--fixed"]


@pytest.mark.skipif("libtbprof" in os.environ.get("LD_PRELOAD", ""), reason="running under the preload")
def test_markers_are_noop_without_libtbprof():
	assert not marks.available()
	assert marks.mark(marks.ITER_BEGIN, 0, "x") is None
