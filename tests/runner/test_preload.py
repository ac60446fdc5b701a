"""Under LD_PRELOAD=libtbprof.so (TBPROF_LIB, set by meson's test_env): the
same losses as without it, iteration markers recorded, and a trace that
tbanalyze (TBANALYZE) reads."""
import json
import os
import subprocess
import sys

import pytest

from helpers import child_env, run_py_metrics

LIB = os.environ.get("TBPROF_LIB")
TBANALYZE = os.environ.get("TBANALYZE")
ZOO_LOSSES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo_losses.py")

pytestmark = pytest.mark.skipif(not LIB or not TBANALYZE,
	reason="TBPROF_LIB/TBANALYZE not set (meson test sets them)")


def setup_module():
	# Under meson these are built targets: their absence is a failure, not a skip.
	assert os.path.isfile(LIB), f"TBPROF_LIB {LIB} does not exist"
	assert os.access(TBANALYZE, os.X_OK), f"TBANALYZE {TBANALYZE} is not executable"


def tbanalyze_info(trace):
	proc = subprocess.run([TBANALYZE, "info", str(trace), "--json"], capture_output=True, text=True, timeout=120)
	assert proc.returncode == 0, proc.stderr
	return json.loads(proc.stdout)


def test_run_py_same_losses_and_trace(tmp_path):
	trace = tmp_path / "antipatterns.zst"
	args = ("-m", "paper_antipatterns", "--small", "-t", "train", "--bs", "2", "--niter", "3", "--nwarmup", "1")
	_, plain = run_py_metrics(tmp_path, *args, tag="plain")
	_, traced = run_py_metrics(tmp_path, *args, tag="traced", preload=LIB, TBPROF_OUT=str(trace))
	assert plain["tbprof_loaded"] is False
	assert traced["tbprof_loaded"] is True, "tbprof_marker not resolved under the preload"
	assert traced["losses"] == plain["losses"]
	assert trace.is_file() and trace.stat().st_size > 0
	info = tbanalyze_info(trace)
	# One warm-up-end marker, then a begin and an end per measured iteration.
	assert info["kinds"].get("marker") == 1 + 2 * 3, info["kinds"]


def test_whole_zoo_same_results_under_preload(tmp_path):
	"""Every model, one train and one eval iteration, with and without tbprof."""
	def zoo_run(preload, **env):
		proc = subprocess.run([sys.executable, ZOO_LOSSES], capture_output=True, text=True, timeout=900,
			env=child_env(preload, **env))
		assert proc.returncode == 0, proc.stderr
		return json.loads(proc.stdout)

	trace = tmp_path / "zoo.zst"
	plain = zoo_run(None)
	traced = zoo_run(LIB, TBPROF_OUT=str(trace))
	assert plain.pop("_tbprof_loaded") is False
	assert traced.pop("_tbprof_loaded") is True
	assert traced == plain
	assert trace.is_file()
	tbanalyze_info(trace)
