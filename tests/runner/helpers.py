"""Running run.py in a child process, as users do."""
import json
import os
import subprocess
import sys

SOURCE_ROOT = os.environ.get("TBP_SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(
	os.path.abspath(__file__))))
RUN_PY = os.path.join(SOURCE_ROOT, "run.py")


def child_env(preload=None, **extra):
	env = dict(os.environ)
	env.setdefault("OMP_NUM_THREADS", "1")
	env.pop("LD_PRELOAD", None)
	if preload:
		env["LD_PRELOAD"] = preload
	env.update(extra)
	return env


def run_py(*args, preload=None, timeout=600, **extra_env):
	return subprocess.run([sys.executable, RUN_PY, *args], capture_output=True, text=True,
		env=child_env(preload, **extra_env), timeout=timeout, cwd=SOURCE_ROOT)


def run_py_metrics(tmp_path, *args, tag="metrics", **kwargs):
	"""Runs run.py with --export-metrics and returns (process, metrics dict)."""
	path = tmp_path / f"{tag}.json"
	proc = run_py(*args, "--export-metrics", str(path), **kwargs)
	assert proc.returncode == 0, proc.stderr
	return proc, json.loads(path.read_text())
