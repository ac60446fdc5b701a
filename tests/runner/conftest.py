"""Shared setup of the runner suite: import path, and one thread per torch
process so results do not depend on how loaded the machine is (2 cores
shared by CI's parallel tests) and oversubscribed OpenMP does not stall."""
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
SOURCE_ROOT = os.environ.get("TBP_SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(
	os.path.abspath(__file__))))
sys.path.insert(0, SOURCE_ROOT)
